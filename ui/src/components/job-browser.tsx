import { type Job, type JobState, must } from '../api.js';
import { count, time } from '../format.js';
import { usePoll } from '../hooks.js';
import { href, setQuery } from '../router.js';
import { useSession } from '../session.js';
import { ErrorLine, Loading, Pager, Scroll, StateBadge, usePager } from './bits.js';

export const STATES: JobState[] = ['ready', 'scheduled', 'claimed', 'dead', 'completed', 'cancelled'];
const PAGE = 25;

interface Props {
  queue: string;
  state: JobState;
  order: 'asc' | 'desc';
}

/**
 * A queue's jobs in one state, a page at a time (keyset paging: GET /v1/queues/{queue}/jobs with
 * the previous page's next_cursor). The filter lives in the page's URL, so it can be shared. Not
 * polled: a list that moves under the reader is hard to use; "Refresh" reads it again.
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
        <label>
          Order{' '}
          <select value={props.order} onChange={(e) => setQuery({ order: e.currentTarget.value })}>
            <option value="asc">{props.state === 'ready' ? 'next to run first' : 'oldest first'}</option>
            <option value="desc">{props.state === 'ready' ? 'last to run first' : 'newest first'}</option>
          </select>
        </label>
      </form>
      {/* A new filter starts again at the first page. */}
      <JobPages key={`${props.queue}/${props.state}/${props.order}`} {...props} />
    </section>
  );
}

function JobPages({ queue, state, order }: Props) {
  const { api } = useSession();
  const pager = usePager();
  const page = usePoll(
    (signal) =>
      must(
        api.GET('/v1/queues/{queue}/jobs', {
          params: { path: { queue }, query: { state, order, limit: PAGE, cursor: pager.cursor } },
          signal,
        }),
      ),
    0,
    [api, queue, state, order, pager.cursor],
  );
  const jobs = page.data?.jobs;
  const finished = state === 'completed' || state === 'dead' || state === 'cancelled';
  return (
    <>
      <button type="button" class="refresh" onClick={page.reload}>
        Refresh jobs
      </button>
      <ErrorLine error={page.error} />
      {!jobs ? (
        page.error ? null : (
          <Loading />
        )
      ) : jobs.length === 0 ? (
        <p>No {state} jobs.</p>
      ) : (
        <Scroll label={`${state} jobs`}>
          <table class="jobs">
            <caption class="visually-hidden">{`${state} jobs of ${queue}`}</caption>
            <thead>
              <tr>
                <th scope="col">Job</th>
                <th scope="col">State</th>
                <th scope="col" class="num">
                  Priority
                </th>
                <th scope="col" class="num">
                  Attempts
                </th>
                <th scope="col">
                  {finished ? 'Finished' : state === 'claimed' ? 'Lease expires' : 'Run at'}
                </th>
                <th scope="col">Last error</th>
              </tr>
            </thead>
            <tbody>
              {jobs.map((job) => (
                <JobRow key={job.id} job={job} finished={finished} />
              ))}
            </tbody>
          </table>
        </Scroll>
      )}
      <Pager pager={pager} nextCursor={page.data?.next_cursor} what={`${state} jobs`} />
    </>
  );
}

function JobRow({ job, finished }: { job: Job; finished: boolean }) {
  const when = finished ? job.finished_at : job.state === 'claimed' ? job.lease_expires_at : job.run_at;
  return (
    <tr>
      <th scope="row">
        <a href={href('/jobs', job.id)}>{job.id}</a>
      </th>
      <td>
        <StateBadge state={job.state} />
      </td>
      <td class="num">{count(job.priority)}</td>
      <td class="num">
        {job.attempts} of {job.max_attempts}
      </td>
      <td>{time(when)}</td>
      <td class="message">{job.last_error?.message ?? ''}</td>
    </tr>
  );
}
