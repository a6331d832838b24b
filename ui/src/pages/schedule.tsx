import { ApiError, must, type Schedule, serverClock } from '../api.js';
import { ActionBar } from '../components/actions.js';
import { ErrorLine, Facts, Loading } from '../components/bits.js';
import { scheduleActions } from '../components/schedule-actions.js';
import { When } from '../components/when.js';
import { REFRESH_MS } from '../config.js';
import { json, period, time } from '../format.js';
import { usePoll } from '../hooks.js';
import type { PageProps } from '../page.js';
import { href } from '../router.js';
import { useSession } from '../session.js';

const OVERLAP = {
  allow: 'allow: every occurrence enqueues a job',
  skip: 'skip: no new job while its last job is still scheduled, ready or claimed',
};
const CATCH_UP = {
  none: 'none: after downtime, only an occurrence within the grace period runs',
  latest: 'latest: after downtime, one job for the latest missed occurrence',
  all: 'all: after downtime, one job for each missed occurrence (at most 100)',
};

/** One cron schedule: its definition, next and last run, last error; pause, resume, trigger now (admin). */
export function SchedulePage({ params }: PageProps) {
  const { api, canAct } = useSession();
  const name = params.name!;
  const schedule = usePoll(
    async (signal) => {
      const answer = await api.GET('/v1/schedules/{name}', { params: { path: { name } }, signal });
      return { schedule: await must(Promise.resolve(answer)), now: serverClock(answer.response) };
    },
    REFRESH_MS,
    [api, name],
  );
  const s = schedule.data?.schedule;
  const missing = schedule.error instanceof ApiError && schedule.error.status === 404;
  return (
    <>
      <h1 tabIndex={-1}>
        Schedule {name}
        {s?.paused && <span class="badge paused">paused</span>}
      </h1>
      {missing ? (
        <p role="alert">There is no schedule named {name} (or it belongs to a queue this key may not use).</p>
      ) : (
        <ErrorLine error={schedule.error} />
      )}
      {!s ? (
        schedule.error ? null : (
          <Loading />
        )
      ) : (
        <>
          {canAct && <ActionBar actions={scheduleActions(api, s)} onDone={schedule.reload} />}
          <LastError schedule={s} />
          <Definition schedule={s} now={schedule.data!.now} />
          <section aria-labelledby="payload-title">
            <h2 id="payload-title">Payload of each job</h2>
            <pre class="json">{json(s.payload)}</pre>
          </section>
        </>
      )}
    </>
  );
}

function LastError({ schedule: s }: { schedule: Schedule }) {
  if (!s.last_error) return null;
  return (
    <section aria-labelledby="last-error-title">
      <h2 id="last-error-title">Last error</h2>
      <p>
        At {time(s.last_error.at)}, an occurrence could not be enqueued (the schedule moved on to its next
        one):
      </p>
      <p class="error" data-testid="last-error">
        {s.last_error.message}
      </p>
    </section>
  );
}

function Definition({ schedule: s, now }: { schedule: Schedule; now: number }) {
  const rows: [string, string | preact.JSX.Element][] = [
    ['Queue', <a href={href('/queues', s.queue)}>{s.queue}</a>],
    ['Cron', <code>{s.cron}</code>],
    ['Time zone', s.timezone],
    ['Paused', s.paused ? 'yes: nothing is enqueued' : 'no'],
    ['Next run', s.paused ? 'none while paused' : <When at={s.next_run_at} now={now} />],
    ['Last run', <When at={s.last_run_at} now={now} />],
    ['Last job', s.last_job_id ? <a href={href('/jobs', s.last_job_id)}>{s.last_job_id}</a> : 'none yet'],
    ['Overlap', OVERLAP[s.overlap]],
    ['Catch up', CATCH_UP[s.catch_up]],
    ['Priority', String(s.priority)],
    ['Max attempts', s.max_attempts === null ? 'the queue’s setting' : String(s.max_attempts)],
    ['Group', s.group ?? 'none'],
    ['Timeout per attempt', s.timeout_ms === null ? 'the queue’s setting' : period(s.timeout_ms)],
    ['Expires', s.expires_in_ms === null ? 'never' : `${period(s.expires_in_ms)} after it is enqueued`],
    [
      'Unique key',
      s.unique_key === null
        ? 'none'
        : `${s.unique_key} (${s.on_conflict === 'replace' ? 'replaces' : 'folds into'} the job still waiting)`,
    ],
    [
      'Source',
      s.source === 'api'
        ? 'the API'
        : s.drifted
          ? 'BATON_SCHEDULES_FILE, changed through the API since (the next start keeps the change)'
          : 'BATON_SCHEDULES_FILE',
    ],
    ['Created', time(s.created_at)],
    ['Updated', time(s.updated_at)],
  ];
  return (
    <section aria-labelledby="definition-title">
      <h2 id="definition-title">Definition</h2>
      <Facts rows={rows} look="settings" />
    </section>
  );
}
