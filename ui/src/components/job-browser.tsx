import { useEffect, useState } from 'preact/hooks';
import { type Job, type JobState, must } from '../api.js';
import { clock, count } from '../format.js';
import { href, setQuery } from '../router.js';
import { useSession } from '../session.js';
import { ErrorLine, Loading, Pager, Scroll, StateBadge, usePager } from './bits.js';
import { BulkBar, SelectAllCell, SelectCell, type Selection } from './bulk-actions.js';
import { RefreshState, useHeldList } from './held-list.js';

/**
 * What the browser lists: a state, or `failing` (live jobs whose last attempt failed, waiting for a
 * retry or running it: the Jobs page's failing list, for this queue).
 */
export type BrowserState = JobState | 'failing';

export const STATES: BrowserState[] = [
  'ready',
  'scheduled',
  'waiting',
  'claimed',
  'failing',
  'dead',
  'completed',
  'cancelled',
];

/** Finished jobs are looked at newest first; live ones in the order they run. */
export const defaultOrder = (state: BrowserState): 'asc' | 'desc' =>
  state === 'dead' || state === 'completed' || state === 'cancelled' ? 'desc' : 'asc';
const PAGE = 25;

interface Props {
  queue: string;
  state: BrowserState;
  order: 'asc' | 'desc';
  /** Only this group's jobs (the URL's ?group=); undefined: every job. */
  group?: string;
  /** Offer a group filter (the queue's jobs carry groups). A group's own page passes false: its group is fixed. */
  groupFilter?: boolean;
}

/** What the API takes as a group name: 1 to 128 printable ASCII characters, no spaces. */
const GROUP_NAME = /^[!-~]{1,128}$/;

/**
 * A queue's jobs in one state (and maybe one group), a page at a time (keyset paging: GET
 * /v1/queues/{queue}/jobs with the previous page's next_cursor). The filter lives in the page's URL,
 * so it can be shared. It refreshes on its own, but holds still while the operator points at it,
 * works or selects text in it, or has jobs ticked (a list that moves under the reader is hard to
 * use); admins act on the ticked jobs (bulk-actions.tsx).
 */
export function JobBrowser(props: Props) {
  return (
    <section aria-labelledby="jobs-title">
      <h2 id="jobs-title">Jobs</h2>
      <form class="filters" onSubmit={(e) => e.preventDefault()}>
        <label>
          State{' '}
          <select value={props.state} onChange={(e) => setQuery({ state: e.currentTarget.value })}>
            {STATES.map((s) => (
              <option key={s} value={s}>
                {s}
              </option>
            ))}
          </select>
        </label>
        {props.state === 'failing' ? (
          <span class="muted">Latest failure first.</span>
        ) : (
          <label>
            Order{' '}
            <select value={props.order} onChange={(e) => setQuery({ order: e.currentTarget.value })}>
              <option value="asc">{props.state === 'ready' ? 'next to run first' : 'oldest first'}</option>
              <option value="desc">{props.state === 'ready' ? 'last to run first' : 'newest first'}</option>
            </select>
          </label>
        )}
      </form>
      {props.groupFilter && <GroupFilter group={props.group} />}
      {/* A new filter starts again at the first page. */}
      <JobPages key={`${props.queue}/${props.state}/${props.order}/${props.group ?? ''}`} {...props} />
    </section>
  );
}

/** The group filter: free text, so it applies on Enter or its button, and goes into the URL. */
function GroupFilter({ group }: { group?: string }) {
  const [text, setText] = useState(group ?? '');
  const [invalid, setInvalid] = useState(false);
  // The URL changed (a link, the back button): show its filter.
  useEffect(() => {
    setText(group ?? '');
    setInvalid(false);
  }, [group]);
  const apply = (e: Event) => {
    e.preventDefault();
    const value = text.trim();
    if (value !== '' && !GROUP_NAME.test(value)) return setInvalid(true);
    setInvalid(false);
    setQuery({ group: value || undefined });
  };
  return (
    <form class="filters" onSubmit={apply}>
      <label>
        Group{' '}
        <input
          type="text"
          value={text}
          spellcheck={false}
          autocomplete="off"
          maxLength={128}
          placeholder="every group"
          aria-invalid={invalid ? true : undefined}
          aria-describedby={invalid ? 'group-filter-error' : undefined}
          onInput={(e) => setText(e.currentTarget.value)}
        />
      </label>
      <button type="submit">Filter by group</button>
      {group !== undefined && (
        <button type="button" onClick={() => setQuery({ group: undefined })}>
          Every group
        </button>
      )}
      {invalid && (
        <p id="group-filter-error" class="error" role="alert">
          A group name is 1 to 128 printable ASCII characters, without spaces.
        </p>
      )}
    </form>
  );
}

function JobPages({ queue, state, order, group, groupFilter }: Props) {
  const { api, canAct } = useSession();
  const pager = usePager();
  const {
    list: page,
    region,
    selection,
    held,
  } = useHeldList(
    (signal) =>
      state === 'failing'
        ? must(
            api.GET('/v1/jobs', {
              params: { query: { state, queue, group, limit: PAGE, cursor: pager.cursor } },
              signal,
            }),
          )
        : must(
            api.GET('/v1/queues/{queue}/jobs', {
              params: { path: { queue }, query: { state, order, group, limit: PAGE, cursor: pager.cursor } },
              signal,
            }),
          ),
    [api, queue, state, order, group, pager.cursor],
  );
  const jobs = page.data?.jobs;
  const finished = state === 'completed' || state === 'dead' || state === 'cancelled';
  const what = group === undefined ? `${state} jobs` : `${state} jobs of group ${group}`;
  // The group of each job, when the list may hold several groups.
  const showGroup = groupFilter === true && group === undefined;
  return (
    <>
      <RefreshState held={held} />
      <button type="button" class="refresh" onClick={page.reload}>
        Refresh jobs
      </button>
      <ErrorLine error={page.error} />
      {canAct && <BulkBar selection={selection} onDone={page.reload} />}
      <div ref={region}>
        {!jobs ? (
          page.error ? null : (
            <Loading />
          )
        ) : jobs.length === 0 ? (
          <p>No {what}.</p>
        ) : (
          <Scroll label={what}>
            <table class="jobs">
              <caption class="visually-hidden">{`${what} of ${queue}`}</caption>
              <thead>
                <tr>
                  {canAct && <SelectAllCell selection={selection} jobs={jobs} />}
                  <th scope="col">Job</th>
                  <th scope="col">State</th>
                  {showGroup && <th scope="col">Group</th>}
                  <th scope="col" class="num">
                    Priority
                  </th>
                  <th scope="col" class="num">
                    Attempts
                  </th>
                  <th scope="col">
                    {finished
                      ? 'Finished'
                      : state === 'claimed'
                        ? 'Lease expires'
                        : state === 'failing'
                          ? 'Next retry'
                          : 'Run at'}
                  </th>
                  <th scope="col">Payload</th>
                  <th scope="col">Last error</th>
                </tr>
              </thead>
              <tbody>
                {jobs.map((job) => (
                  <JobRow
                    key={job.id}
                    job={job}
                    finished={finished}
                    showGroup={showGroup}
                    selection={canAct ? selection : undefined}
                  />
                ))}
              </tbody>
            </table>
          </Scroll>
        )}
      </div>
      <Pager pager={pager} nextCursor={page.data?.next_cursor} what={what} />
    </>
  );
}

function JobRow({
  job,
  finished,
  showGroup,
  selection,
}: {
  job: Job;
  finished: boolean;
  showGroup: boolean;
  selection?: Selection;
}) {
  const when = finished ? job.finished_at : job.state === 'claimed' ? job.lease_expires_at : job.run_at;
  return (
    <tr>
      {selection && <SelectCell selection={selection} job={job} />}
      <th scope="row">
        <a href={href('/jobs', job.id)}>{job.id}</a>
      </th>
      <td>
        <StateBadge state={job.state} />
      </td>
      {showGroup && (
        <td class="group">
          {job.group === null ? (
            <span class="muted">—</span>
          ) : (
            <a href={href('/queues', job.queue, 'groups', job.group)}>{job.group}</a>
          )}
        </td>
      )}
      <td class="num">{count(job.priority)}</td>
      <td class="num">
        {job.attempts} of {job.max_attempts}
      </td>
      <td>{clock(when)}</td>
      <td class="payload">
        <code>{job.payload_preview ?? ''}</code>
      </td>
      <td class="message">{job.last_error?.message ?? ''}</td>
    </tr>
  );
}
