import { ApiError, type Group, must, type Queue } from '../api.js';
import { ActionBar } from '../components/actions.js';
import { ErrorLine, Facts, Loading } from '../components/bits.js';
import { CountGroup } from '../components/count-group.js';
import { groupActions, ownSettings } from '../components/group-actions.js';
import { type BrowserState, defaultOrder, JobBrowser, STATES } from '../components/job-browser.js';
import { own } from '../components/queue-groups.js';
import { REFRESH_MS } from '../config.js';
import { atOnce, count, rate } from '../format.js';
import { usePoll } from '../hooks.js';
import type { PageProps } from '../page.js';
import { href } from '../router.js';
import { useSession } from '../session.js';

/**
 * One group of a queue: its counts (the leader's, re-read every REFRESH_MS), the limits and weight
 * in effect and which of them it sets itself, pause / resume and reset (admin), and its jobs.
 */
export function GroupPage({ params, query }: PageProps) {
  const { api, canAct } = useSession();
  const queue = params.queue!;
  const name = params.group!;
  const group = usePoll(
    (signal) =>
      must(
        api.GET('/v1/queues/{queue}/groups/{group}', { params: { path: { queue, group: name } }, signal }),
      ),
    REFRESH_MS,
    [api, queue, name],
  );
  // The queue's group defaults, for "reset" and for what the group's own settings replace.
  const q = usePoll(
    (signal) => must(api.GET('/v1/queues/{queue}', { params: { path: { queue } }, signal })),
    0,
    [api, queue],
  );
  const state = (STATES as string[]).includes(query.get('state') ?? '')
    ? (query.get('state') as BrowserState)
    : 'ready';
  const asked = query.get('order');
  const order = asked === 'desc' || asked === 'asc' ? asked : defaultOrder(state);
  const g = group.data;
  const missing = group.error instanceof ApiError && group.error.status === 404;
  const reload = () => {
    group.reload();
    q.reload();
  };
  return (
    <>
      <h1 tabIndex={-1}>
        Group {name}
        {g?.paused && <span class="badge paused">paused</span>}
      </h1>
      <p>
        Of queue <a href={href('/queues', queue)}>{queue}</a>
      </p>
      {missing ? (
        <p role="alert">There is no queue named {queue}.</p>
      ) : (
        <ErrorLine error={group.error ?? q.error} />
      )}
      {!g ? (
        group.error ? null : (
          <Loading />
        )
      ) : (
        <>
          {canAct && <ActionBar actions={groupActions(api, { ...g, group: name }, q.data)} onDone={reload} />}
          <Counts group={g} />
          <Settings group={g} queue={q.data} />
          <JobBrowser queue={queue} state={state} order={order} group={name} />
        </>
      )}
    </>
  );
}

function Counts({ group: g }: { group: Group }) {
  return (
    <CountGroup
      id="counts-title"
      title="Now"
      at={g.refreshed_at}
      rows={[
        ['Ready', count(g.ready)],
        ['Claimed', count(g.claimed)],
        ['Scheduled', count(g.scheduled)],
      ]}
      note="The maintenance leader counts groups every 5 s."
    />
  );
}

function Settings({ group: g, queue: q }: { group: Group; queue?: Queue }) {
  const dflt = (text: string) => (q ? ` (queue default: ${text})` : '');
  const rows: [string, string][] = [
    ['Paused', g.paused ? 'yes: claims get none of its jobs' : 'no'],
    [
      'Concurrency limit',
      own(g, 'concurrency_limit', atOnce(g.concurrency_limit)) +
        (g.overridden.includes('concurrency_limit') && q ? dflt(atOnce(q.group_concurrency_limit)) : ''),
    ],
    [
      'Rate limit',
      own(g, 'rate_limit', rate(g.rate_limit)) +
        (g.overridden.includes('rate_limit') && q ? dflt(rate(q.group_rate_limit)) : ''),
    ],
    [
      'Weight',
      `${own(g, 'weight', `${g.weight} ${g.weight === 1 ? 'job' : 'jobs'} per turn`)}` +
        (g.overridden.includes('weight') ? dflt('1') : ''),
    ],
    [
      'Its own settings',
      g.overridden.length === 0 ? 'none: it follows the queue’s group defaults' : ownSettings(g),
    ],
  ];
  return (
    <section aria-labelledby="settings-title">
      <h2 id="settings-title">Settings</h2>
      <Facts rows={rows} look="settings" />
    </section>
  );
}
