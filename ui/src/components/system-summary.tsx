import { must, type Overview } from '../api.js';
import { REFRESH_MS } from '../config.js';
import { count, duration, plural } from '../format.js';
import { eachMinute, sum } from '../history.js';
import { usePoll } from '../hooks.js';
import { href } from '../router.js';
import { useSession } from '../session.js';
import { ErrorLine, Loading } from './bits.js';
import { Chart } from './chart.js';
import { CountGroup } from './count-group.js';

/**
 * Is the system healthy, at a glance (GET /v1/overview, every REFRESH_MS): jobs per minute over
 * every queue in the last hour, the totals as the leader last counted them (live jobs and dead ones
 * kept in history, each with its count's time), and the queues needing attention first. One
 * request, whatever the number of queues.
 */
export function SystemSummary() {
  const { api } = useSession();
  const overview = usePoll(async (signal) => must(api.GET('/v1/overview', { signal })), REFRESH_MS, [api]);
  return (
    <section aria-labelledby="system-title" class="system">
      <h2 id="system-title">Every queue</h2>
      <ErrorLine error={overview.error} />
      {overview.data ? <Summary overview={overview.data} /> : overview.error ? null : <Loading />}
    </section>
  );
}

function Summary({ overview: o }: { overview: Overview }) {
  const now = Date.parse(o.as_of);
  const at: number[] = [];
  const series = {
    enqueued: [] as (number | null)[],
    completed: [] as (number | null)[],
    failed: [] as (number | null)[],
    attemptsFailed: [] as (number | null)[],
  };
  for (const { at: t, sample: m, pending } of eachMinute(o.as_of, 60, o.minutes)) {
    at.push(t);
    series.enqueued.push(pending ? null : (m?.enqueued ?? 0));
    series.completed.push(pending ? null : (m?.completed ?? 0));
    series.failed.push(pending ? null : (m?.failed ?? 0));
    series.attemptsFailed.push(pending ? null : (m?.attempts_failed ?? 0));
  }
  const t = o.totals;
  const counted = t.counted_at ? now - Date.parse(t.counted_at) : null;
  return (
    <>
      <div class="count-groups">
        <CountGroup
          id="system-live-title"
          heading="h3"
          title="Now"
          at={t.counted_at}
          rows={[
            ['Ready', count(t.ready)],
            ['Claimed', count(t.claimed)],
            ['Scheduled', count(t.scheduled)],
            ['Waiting for parents', count(t.waiting)],
            [
              'Failing (retrying)',
              <span class={t.failing > 0 ? 'alert' : undefined}>{count(t.failing)}</span>,
            ],
            [
              'Queues',
              <>
                {count(t.queues)}
                {t.paused > 0 && <span class="badge paused">{count(t.paused)} paused</span>}
              </>,
            ],
          ]}
        />
        <CountGroup
          id="system-kept-title"
          heading="h3"
          title="Kept in history"
          at={t.finished_counted_at}
          rows={[['Dead', <span class={t.dead > 0 ? 'alert' : undefined}>{count(t.dead)}</span>]]}
          note="Within retention, counted about once a minute, like the dead jobs below."
        />
      </div>
      {counted !== null && counted > 60_000 ? (
        <p class="warning" role="alert">
          Counted {duration(counted)} ago: counts are not being refreshed. Is any replica running maintenance
          (BATON_MAINTENANCE)?
        </p>
      ) : (
        <p class="muted">
          {counted === null
            ? 'Not counted yet: the maintenance leader counts every few seconds.'
            : `Live jobs counted by the maintenance leader ${counted < 2000 ? 'just now' : `${duration(counted)} ago`}, every few seconds; the chart is the last hour in minutes.`}
        </p>
      )}
      <Chart
        data={[at, series.enqueued, series.completed, series.attemptsFailed, series.failed]}
        series={[
          { label: 'enqueued', color: '#1f4e79' },
          { label: 'completed', color: '#2b7a3d' },
          { label: 'attempts failed', color: '#c26a00', bars: true },
          { label: 'dead', color: '#b3261e', bars: true },
        ]}
        summary={
          `Every queue, the last hour: ${count(sum(series.enqueued))} enqueued, ` +
          `${count(sum(series.completed))} completed, ${count(sum(series.attemptsFailed))} attempts failed, ` +
          `${count(sum(series.failed))} failed (dead).`
        }
        height={140}
      />
      <h3>Needs attention</h3>
      {o.attention.length === 0 ? (
        <p>
          Nothing: no attempt failed in the last hour, no job is dead or failing, no queue is paused or
          lagging.
        </p>
      ) : (
        <ul class="attention" aria-label="Queues needing attention">
          {o.attention.map((a) => (
            <li key={a.queue}>
              <a href={href('/queues', a.queue)} aria-label={`${a.queue} (needs attention)`}>
                {a.queue}
              </a>
              : {reasons(a).join(', ')}
              {(a.failed_last_hour > 0 || a.dead > 0) && (
                <>
                  {' '}
                  (
                  <a href={`${href('/jobs')}?${new URLSearchParams({ queue: a.queue, within: 'all' })}`}>
                    see its dead jobs
                  </a>
                  )
                </>
              )}
              {a.failing > 0 && (
                <>
                  {' '}
                  (
                  <a
                    href={`${href('/jobs')}?${new URLSearchParams({ show: 'failing', queue: a.queue, within: 'all' })}`}
                  >
                    see its failing jobs
                  </a>
                  )
                </>
              )}
            </li>
          ))}
        </ul>
      )}
    </>
  );
}

function reasons(a: Overview['attention'][number]): string[] {
  const out: string[] = [];
  if (a.failed_last_hour > 0) out.push(`${count(a.failed_last_hour)} died in the last hour`);
  if (a.attempts_failed_last_hour > 0) {
    out.push(`${plural(a.attempts_failed_last_hour, 'attempt')} failed in the last hour`);
  }
  if (a.dead > 0) out.push(`${count(a.dead)} dead`);
  if (a.failing > 0) out.push(`${count(a.failing)} failing now`);
  if (a.oldest_ready_age_ms !== null && a.oldest_ready_age_ms > 60_000)
    out.push(`oldest ready job waiting ${duration(a.oldest_ready_age_ms)}`);
  if (a.paused) out.push('paused');
  return out;
}
