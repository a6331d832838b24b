import { must, type Queue } from '../api.js';
import { ErrorLine, Loading, Pager, Scroll, usePager } from '../components/bits.js';
import { Sparklines } from '../components/sparklines.js';
import { SystemSummary } from '../components/system-summary.js';
import { REFRESH_MS } from '../config.js';
import { clock, count, duration } from '../format.js';
import { usePoll } from '../hooks.js';
import { href } from '../router.js';
import { useSession } from '../session.js';

const PAGE = 50;

/**
 * Every queue at a glance (SystemSummary: GET /v1/overview), then each queue with its counts, lag,
 * pause flag, and the last hour's throughput and failure rate. Counts come from GET /v1/queues (the
 * leader's cached figures, the same the summary adds up), re-read every REFRESH_MS; each row's hour
 * from GET /v1/queues/{queue}/history, re-read once a minute.
 */
export function Overview() {
  const { api } = useSession();
  const pager = usePager();
  const list = usePoll(
    (signal) =>
      must(api.GET('/v1/queues', { params: { query: { limit: PAGE, cursor: pager.cursor } }, signal })),
    REFRESH_MS,
    [api, pager.cursor],
  );
  const queues = list.data?.queues;
  return (
    <>
      <h1 tabIndex={-1}>Queues</h1>
      <SystemSummary />
      <h2 id="queues-title">By queue</h2>
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
          <CountTimes queues={queues} />
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
                  <th scope="col">Failures, last hour</th>
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

/**
 * The table holds two counts of each queue: its live jobs (every tick) and its dead ones, kept in
 * history (about once a minute). Each is dated by the latest of the rows, as the summary's totals are.
 */
function CountTimes({ queues }: { queues: Queue[] }) {
  const latest = (at: (q: Queue) => string | null) =>
    queues.map(at).reduce<string | null>((a, b) => (b !== null && (a === null || b > a) ? b : a), null);
  const live = latest((q) => q.stats.live_refreshed_at);
  const kept = latest((q) => q.stats.finished_refreshed_at);
  return (
    <p class="muted" data-testid="queue-count-times">
      Ready, scheduled, claimed and oldest ready as of {clock(live)}; dead (kept in history, counted about
      once a minute) as of {clock(kept)}.
    </p>
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
