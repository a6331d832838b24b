import { must, type Queue, serverClock } from '../api.js';
import { ErrorLine, Loading, Pager, Scroll, usePager } from '../components/bits.js';
import { Sparklines } from '../components/sparklines.js';
import { REFRESH_MS } from '../config.js';
import { count, duration } from '../format.js';
import { usePoll } from '../hooks.js';
import { href } from '../router.js';
import { useSession } from '../session.js';

const PAGE = 50;

/**
 * Every queue with its counts, lag, pause flag, and the last hour's throughput and failure rate.
 * Counts come from GET /v1/queues (the leader's cached figures), re-read every REFRESH_MS; each
 * row's hour from GET /v1/queues/{queue}/history, re-read once a minute.
 */
export function Overview() {
  const { api } = useSession();
  const pager = usePager();
  const list = usePoll(
    async (signal) => {
      const answer = await api.GET('/v1/queues', {
        params: { query: { limit: PAGE, cursor: pager.cursor } },
        signal,
      });
      return { ...(await must(Promise.resolve(answer))), now: serverClock(answer.response) };
    },
    REFRESH_MS,
    [api, pager.cursor],
  );
  const queues = list.data?.queues;
  return (
    <>
      <h1 tabIndex={-1}>Queues</h1>
      <ErrorLine error={list.error} />
      {!queues ? (
        list.error ? null : (
          <Loading />
        )
      ) : queues.length === 0 ? (
        <p>
          No queues yet. A queue appears with its first job, or when it is created with PUT
          /v1/queues/&#123;queue&#125;.
        </p>
      ) : (
        <>
          <Freshness queues={queues} now={list.data!.now} />
          <Scroll label="Queues">
            <table class="queues">
              <caption class="visually-hidden">Queues with their jobs by state and the last hour</caption>
              <thead>
                <tr>
                  <th scope="col">Queue</th>
                  <th scope="col" class="num">
                    Ready
                  </th>
                  <th scope="col" class="num wide">
                    Scheduled
                  </th>
                  <th scope="col" class="num wide">
                    Claimed
                  </th>
                  <th scope="col" class="num">
                    Dead
                  </th>
                  <th scope="col" class="num">
                    Oldest ready
                  </th>
                  <th scope="col">Completed, last hour</th>
                  <th scope="col">Failed, last hour</th>
                </tr>
              </thead>
              <tbody>
                {queues.map((q) => (
                  <QueueRow key={q.name} queue={q} />
                ))}
              </tbody>
            </table>
          </Scroll>
          <Pager pager={pager} nextCursor={list.data?.next_cursor} what="queues" />
        </>
      )}
    </>
  );
}

/** When the leader last counted (by the server's clock): old counts mean no leader is running maintenance. */
function Freshness({ queues, now }: { queues: Queue[]; now: number }) {
  const times = queues.map((q) => q.stats.live_refreshed_at).filter((t): t is string => t !== null);
  if (times.length === 0) {
    return <p class="muted">Not counted yet: the maintenance leader counts every few seconds.</p>;
  }
  const age = now - Math.max(...times.map((t) => Date.parse(t)));
  if (age > 60_000) {
    return (
      <p class="warning" role="alert">
        Counted {duration(age)} ago: counts are not being refreshed. Is any replica running maintenance
        (BATON_MAINTENANCE)?
      </p>
    );
  }
  return (
    <p class="muted">Counted by the maintenance leader {age < 2000 ? 'just now' : `${duration(age)} ago`}.</p>
  );
}

function QueueRow({ queue: q }: { queue: Queue }) {
  return (
    <tr>
      <th scope="row">
        <a href={href('/queues', q.name)}>{q.name}</a>
        {q.paused && <span class="badge paused">paused</span>}
      </th>
      <td class="num">{count(q.stats.ready)}</td>
      <td class="num wide">{count(q.stats.scheduled)}</td>
      <td class="num wide">{count(q.stats.claimed)}</td>
      <td class={q.stats.dead > 0 ? 'num alert' : 'num'}>{count(q.stats.dead)}</td>
      <td class="num">
        {q.stats.oldest_ready_age_ms === null ? '—' : duration(q.stats.oldest_ready_age_ms)}
      </td>
      <Sparklines queue={q.name} />
    </tr>
  );
}
