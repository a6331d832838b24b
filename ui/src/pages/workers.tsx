import { type AnnouncedWorker, type LeaseHolder, must } from '../api.js';
import { ErrorLine, Loading, Scroll } from '../components/bits.js';
import { When } from '../components/when.js';
import { REFRESH_MS } from '../config.js';
import { count, time } from '../format.js';
import { usePoll } from '../hooks.js';
import { href } from '../router.js';
import { useSession } from '../session.js';

/**
 * The workers (GET /v1/workers): first those that announced themselves (PUT /v1/workers/{id}), idle
 * or busy, with what they said of themselves and the jobs they hold; then who holds leases now, each
 * worker and queue with its jobs, oldest claim, last renewal and next lease to run out, read from the
 * jobs in flight (a worker that never announced itself shows only there, while it holds a lease).
 * Times are put against the database's clock of the reading (as_of), the clock they were written by.
 */
export function WorkersPage() {
  const { api, who } = useSession();
  const list = usePoll(
    async (signal) => {
      const answer = await must(api.GET('/v1/workers', { params: { query: { limit: 500 } }, signal }));
      return { ...answer, now: Date.parse(answer.as_of) };
    },
    REFRESH_MS,
    [api],
  );
  const workers = list.data?.workers;
  const announced = list.data?.announced;
  return (
    <>
      <h1 tabIndex={-1}>Workers</h1>
      <ErrorLine error={list.error} />
      {announced && <Announced workers={announced} now={list.data!.now} />}
      <h2>Leases held</h2>
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

/** Workers that announced themselves and were seen lately, busiest first. */
function Announced({ workers, now }: { workers: AnnouncedWorker[]; now: number }) {
  return (
    <section aria-labelledby="announced-title">
      <h2 id="announced-title">Announced</h2>
      {workers.length === 0 ? (
        <p class="muted">
          No worker has announced itself lately. Workers that do (PUT /v1/workers/{'{id}'}, as the libraries
          do) are listed here idle or busy, with their host, pid and concurrency.
        </p>
      ) : (
        <Scroll label="Announced workers">
          <table class="workers announced">
            <caption class="visually-hidden">Workers that announced themselves, busiest first</caption>
            <thead>
              <tr>
                <th scope="col">Worker</th>
                <th scope="col">Status</th>
                <th scope="col">Host, pid</th>
                <th scope="col" class="num">
                  Jobs held
                </th>
                <th scope="col">Queues</th>
                <th scope="col" class="wide">
                  Version
                </th>
                <th scope="col">Last seen</th>
              </tr>
            </thead>
            <tbody>
              {workers.map((w) => (
                <tr key={w.id}>
                  <th scope="row">{w.id}</th>
                  <td>
                    <span class={w.busy ? 'badge busy' : 'badge idle'}>{w.busy ? 'busy' : 'idle'}</span>
                  </td>
                  <td class="name">
                    {w.host ?? '—'}
                    {w.pid !== null && <span class="muted">, {w.pid}</span>}
                  </td>
                  <td class="num wraps">
                    {count(w.jobs)}
                    {w.concurrency !== null && <span class="muted"> of {count(w.concurrency)}</span>}
                    {w.job_ids.length > 0 && (
                      <div class="held">
                        {w.job_ids.map((id) => (
                          <a key={id} href={href('/jobs', id)}>
                            {id}
                          </a>
                        ))}
                      </div>
                    )}
                  </td>
                  <td class="wraps">
                    {w.queues.map((q) => (
                      <a key={q} href={href('/queues', q)} class="queue-link">
                        {q}
                      </a>
                    ))}
                  </td>
                  <td class="wide wraps">{w.version ?? '—'}</td>
                  <td class="wraps">
                    <When at={w.last_seen_at} now={now} />
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </Scroll>
      )}
    </section>
  );
}
