import type { FunctionComponent } from 'preact';
import { ApiError, must, type Queue } from '../api.js';
import { ActionBar } from '../components/actions.js';
import { ErrorLine, Facts, Loading } from '../components/bits.js';
import { CountGroup } from '../components/count-group.js';
import { type BrowserState, defaultOrder, JobBrowser, STATES } from '../components/job-browser.js';
import { queueActions } from '../components/queue-actions.js';
import { Activity } from '../components/queue-activity.js';
import { Groups } from '../components/queue-groups.js';
import { Moves } from '../components/queue-moves.js';
import { Push } from '../components/queue-push.js';
import { REFRESH_MS } from '../config.js';
import { atOnce, count, duration, rate, time } from '../format.js';
import { usePoll } from '../hooks.js';
import type { PageProps } from '../page.js';
import { useSession } from '../session.js';

interface SectionProps {
  queue: Queue;
}

/**
 * The parts of a queue's page below its job browser, in order (its counts come first, then its
 * jobs: what an operator opens the page for). A new part is one entry here: see docs/dashboard.md.
 */
const SECTIONS: [string, FunctionComponent<SectionProps>][] = [
  ['activity', ({ queue }) => <Activity queue={queue.name} />],
  ['groups', Groups],
  ['push', Push],
  ['settings', Settings],
];

export function QueuePage({ params, query }: PageProps) {
  const { api, canAct } = useSession();
  const name = params.queue!;
  const q = usePoll(
    (signal) => must(api.GET('/v1/queues/{queue}', { params: { path: { queue: name } }, signal })),
    REFRESH_MS,
    [api, name],
  );
  const state = (STATES as string[]).includes(query.get('state') ?? '')
    ? (query.get('state') as BrowserState)
    : 'ready';
  const asked = query.get('order');
  const order = asked === 'desc' || asked === 'asc' ? asked : defaultOrder(state);
  const group = query.get('group') || undefined;
  const missing = q.error instanceof ApiError && q.error.status === 404;
  return (
    <>
      <h1 tabIndex={-1}>
        Queue {name}
        {q.data?.paused && <span class="badge paused">paused</span>}
      </h1>
      {missing ? <p role="alert">There is no queue named {name}.</p> : <ErrorLine error={q.error} />}
      {!q.data ? (
        q.error ? null : (
          <Loading />
        )
      ) : (
        <>
          {canAct && <ActionBar actions={queueActions(api, q.data)} onDone={q.reload} />}
          <Moves queue={q.data} onMoved={q.reload} />
          <Counts queue={q.data} />
          <JobBrowser
            queue={name}
            state={state}
            order={order}
            group={group}
            groupFilter={q.data.grouped || group !== undefined}
          />
          {SECTIONS.map(([key, Section]) => (
            <Section key={key} queue={q.data!} />
          ))}
        </>
      )}
    </>
  );
}

function Counts({ queue: q }: SectionProps) {
  const s = q.stats;
  return (
    <div class="count-groups">
      <CountGroup
        id="counts-title"
        title="Now"
        at={s.live_refreshed_at}
        rows={[
          ['Ready', count(s.ready)],
          ['Scheduled', count(s.scheduled)],
          ['Waiting for parents', count(s.waiting)],
          ['Claimed', count(s.claimed)],
          ['Failing (retrying)', <span class={s.failing > 0 ? 'alert' : undefined}>{count(s.failing)}</span>],
          ['Oldest ready', s.oldest_ready_age_ms === null ? '—' : duration(s.oldest_ready_age_ms)],
          ['Completed in the last minute', count(s.completed_last_minute)],
        ]}
      />
      <CountGroup
        id="kept-title"
        title="Kept in history"
        at={s.finished_refreshed_at}
        rows={[
          ['Completed', count(s.completed)],
          ['Dead', count(s.dead)],
          ['Cancelled', count(s.cancelled)],
        ]}
        note={
          `Within retention (completed and cancelled jobs ${duration(q.retention.completed_ms)}, dead ` +
          `${duration(q.retention.dead_ms)}); counted about once a minute.`
        }
      />
    </div>
  );
}

function Settings({ queue: q }: SectionProps) {
  const own = (field: string) => (q.inherited.includes(field) ? ' (server default)' : '');
  const rows: [string, string][] = [
    ['Paused', q.paused ? 'yes: claims get nothing' : 'no'],
    ['Lease', duration(q.lease_ms) + own('lease_ms')],
    ['Max attempts', String(q.max_attempts) + own('max_attempts')],
    [
      'Backoff',
      `${duration(q.backoff.base_ms)} doubling to ${duration(q.backoff.max_ms)}` +
        `${q.backoff.jitter ? ', with jitter' : ''}${own('backoff.base_ms')}`,
    ],
    ['Keep completed', duration(q.retention.completed_ms) + own('retention.completed_ms')],
    ['Keep dead', duration(q.retention.dead_ms) + own('retention.dead_ms')],
    ['Concurrency limit', atOnce(q.concurrency_limit)],
    ['Rate limit', rate(q.rate_limit)],
    ['Groups', q.grouped ? 'its jobs carry groups, served in turn' : 'no job with a group yet'],
    [
      'Each group’s concurrency limit',
      `${atOnce(q.group_concurrency_limit)} (unless the group sets its own)`,
    ],
    ['Each group’s rate limit', `${rate(q.group_rate_limit)} (unless the group sets its own)`],
    ['Created', `${time(q.created_at)}${q.auto_created ? ' by a first enqueue (removed when idle)' : ''}`],
    ['Updated', time(q.updated_at)],
  ];
  return (
    <section aria-labelledby="settings-title">
      <h2 id="settings-title">Settings</h2>
      <Facts rows={rows} look="settings" />
    </section>
  );
}
