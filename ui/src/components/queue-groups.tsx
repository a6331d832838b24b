import { type Group, must, type Queue } from '../api.js';
import { REFRESH_MS } from '../config.js';
import { atOnce, count, rate, time } from '../format.js';
import { usePoll } from '../hooks.js';
import { href } from '../router.js';
import { useSession } from '../session.js';
import { useActions } from './actions.js';
import { ErrorLine, Loading, Pager, Scroll, usePager } from './bits.js';
import { isNamed, pauseAction } from './group-actions.js';

const PAGE = 20;

/**
 * A queue's groups, busiest (ready + claimed) first: GET /v1/queues/{queue}/groups, keyset paged.
 * The counts are the leader's (group_stats, recounted every 5 s), so the page re-reads them every
 * REFRESH_MS like the queue's own counts. Shown when the queue's jobs carry groups, or when groups
 * have settings of their own; a queue without either has no groups to show.
 */
export function Groups({ queue }: { queue: Queue }) {
  const { api, canAct } = useSession();
  const pager = usePager();
  const list = usePoll(
    (signal) =>
      must(
        api.GET('/v1/queues/{queue}/groups', {
          params: { path: { queue: queue.name }, query: { limit: PAGE, cursor: pager.cursor } },
          signal,
        }),
      ),
    // A queue without grouped jobs can only have groups with overrides: read them once.
    queue.grouped ? REFRESH_MS : 0,
    [api, queue.name, pager.cursor, queue.grouped],
  );
  const run = useActions(list.reload);
  const groups = list.data?.groups;
  if (!queue.grouped && pager.page === 1 && !list.error && groups?.length === 0) return null;
  if (!queue.grouped && !list.data && !list.error) return null;
  const countedAt = groups?.find((g) => g.refreshed_at)?.refreshed_at;
  return (
    <section aria-labelledby="groups-title">
      <h2 id="groups-title">Groups</h2>
      <p class="muted">
        Busiest first (ready + claimed jobs).{' '}
        {countedAt
          ? `Counted by the maintenance leader at ${time(countedAt)} (every 5 s).`
          : 'Not counted yet: the maintenance leader counts groups every 5 s.'}{' '}
        Limits and weight are those in effect: the group’s own (marked “own”), else the queue’s group
        defaults.
      </p>
      <ErrorLine error={list.error} />
      {canAct && run.status}
      {!groups ? (
        list.error ? null : (
          <Loading />
        )
      ) : groups.length === 0 ? (
        <p>No groups with jobs.</p>
      ) : (
        <Scroll label="Groups">
          <table class="groups">
            <caption class="visually-hidden">{`Groups of ${queue.name}, busiest first`}</caption>
            <thead>
              <tr>
                <th scope="col">Group</th>
                <th scope="col" class="num">
                  Ready
                </th>
                <th scope="col" class="num">
                  Claimed
                </th>
                <th scope="col" class="num wide">
                  Scheduled
                </th>
                <th scope="col" class="wide">
                  Concurrency
                </th>
                <th scope="col" class="wide">
                  Rate
                </th>
                <th scope="col" class="num wide">
                  Weight
                </th>
                {canAct && <th scope="col">Action</th>}
              </tr>
            </thead>
            <tbody>
              {groups.map((g) => (
                <GroupRow key={g.group ?? ''} group={g}>
                  {canAct && <td>{isNamed(g) ? run.button(pauseAction(api, g)) : null}</td>}
                </GroupRow>
              ))}
            </tbody>
          </table>
        </Scroll>
      )}
      <Pager pager={pager} nextCursor={list.data?.next_cursor} what="groups" />
      {run.dialog}
    </section>
  );
}

/** A field's value, marked when the group sets it itself rather than following the queue's default. */
export const own = (g: Group, field: string, text: string) =>
  g.overridden.includes(field) ? `${text} (own)` : text;

function GroupRow({ group: g, children }: { group: Group; children: preact.ComponentChildren }) {
  return (
    <tr>
      <th scope="row">
        {isNamed(g) ? (
          <a href={href('/queues', g.queue, 'groups', g.group)}>{g.group}</a>
        ) : (
          <span class="muted">(no group)</span>
        )}
        {g.paused && <span class="badge paused">paused</span>}
      </th>
      <td class="num">{count(g.ready)}</td>
      <td class="num">{count(g.claimed)}</td>
      <td class="num wide">{count(g.scheduled)}</td>
      <td class="wide wraps">{own(g, 'concurrency_limit', atOnce(g.concurrency_limit))}</td>
      <td class="wide">{own(g, 'rate_limit', rate(g.rate_limit))}</td>
      <td class="num wide wraps">{own(g, 'weight', String(g.weight))}</td>
      {children}
    </tr>
  );
}
