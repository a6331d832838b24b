import { type LeaseHolder, must, serverClock } from '../api.js';
import { ErrorLine, Loading, Scroll } from '../components/bits.js';
import { When } from '../components/when.js';
import { REFRESH_MS } from '../config.js';
import { count, time } from '../format.js';
import { usePoll } from '../hooks.js';
import { href } from '../router.js';
import { useSession } from '../session.js';

/**
 * Who holds leases now (GET /v1/workers): each worker and queue with the jobs it holds, its oldest
 * claim, its last renewal and its next lease to run out. Read from the jobs in flight, one query per
 * poll; a worker that holds nothing is not listed.
 */
export function WorkersPage() {
  const { api, who } = useSession();
  const list = usePoll(
    async (signal) => {
      const answer = await api.GET('/v1/workers', { params: { query: { limit: 500 } }, signal });
      return { ...(await must(Promise.resolve(answer))), now: serverClock(answer.response) };
    },
    REFRESH_MS,
    [api],
  );
  const workers = list.data?.workers;
  return (
    <>
      <h1 tabIndex={-1}>Workers</h1>
      <ErrorLine error={list.error} />
      {!workers ? (
        list.error ? null : (
          <Loading />
        )
      ) : workers.length === 0 ? (
        <p>No worker holds a lease now.</p>
      ) : (
        <>
          <p class="muted">
            {count(workers.reduce((n, w) => n + w.jobs, 0))} jobs under lease, as of {time(list.data!.as_of)}.
            {who.queue_limited && ' This key sees only the queues it may use.'}
          </p>
          <Scroll label="Workers">
            <table class="workers">
              <caption class="visually-hidden">Workers holding leases, most jobs first</caption>
              <thead>
                <tr>
                  <th scope="col">Worker</th>
                  <th scope="col">Queue</th>
                  <th scope="col" class="num">
                    Jobs held
                  </th>
                  <th scope="col">Oldest claim</th>
                  <th scope="col" class="wide">
                    Last renewal
                  </th>
                  <th scope="col" class="wide">
                    Next expiry
                  </th>
                </tr>
              </thead>
              <tbody>
                {workers.map((w) => (
                  <WorkerRow key={`${w.worker_id}\u0000${w.queue}`} worker={w} now={list.data!.now} />
                ))}
              </tbody>
            </table>
          </Scroll>
        </>
      )}
    </>
  );
}

function WorkerRow({ worker: w, now }: { worker: LeaseHolder; now: number }) {
  return (
    <tr>
      <th scope="row">{w.worker_id ?? <span class="muted">(no worker id)</span>}</th>
      <td class="name">
        <a href={href('/queues', w.queue)}>{w.queue}</a>
      </td>
      <td class="num">{count(w.jobs)}</td>
      <td class="wraps">
        <When at={w.oldest_claimed_at} now={now} />
      </td>
      <td class="wide wraps">
        <When at={w.last_renewed_at} now={now} />
      </td>
      <td class="wide wraps">
        <When at={w.next_expiry_at} now={now} />
      </td>
    </tr>
  );
}
