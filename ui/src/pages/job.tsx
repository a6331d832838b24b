import { ApiError, type Job, must, type RelatedJob } from '../api.js';
import { ActionBar } from '../components/actions.js';
import { ErrorLine, Facts, Loading, Scroll, StateBadge } from '../components/bits.js';
import { jobActions } from '../components/job-actions.js';
import { JobGraph } from '../components/job-graph.js';
import { REFRESH_MS } from '../config.js';
import { json, period, time } from '../format.js';
import { usePoll } from '../hooks.js';
import type { PageProps } from '../page.js';
import { href } from '../router.js';
import { useSession } from '../session.js';

/** One job: what it carries, where it is, every failed attempt; cancel or redrive it (admin). */
export function JobPage({ params }: PageProps) {
  const { api, canAct } = useSession();
  const id = params.id!;
  const job = usePoll(
    (signal) => must(api.GET('/v1/jobs/{id}', { params: { path: { id } }, signal })),
    REFRESH_MS,
    [api, id],
  );
  const j = job.data;
  const missing = job.error instanceof ApiError && job.error.status === 404;
  return (
    <>
      <h1 tabIndex={-1}>
        Job {id} {j && <StateBadge state={j.state} />}
      </h1>
      {missing ? (
        <p role="alert">There is no job {id} (or it was pruned after its retention).</p>
      ) : (
        <ErrorLine error={job.error} />
      )}
      {!j ? (
        job.error ? null : (
          <Loading />
        )
      ) : (
        <>
          {canAct && <ActionBar actions={jobActions(api, j)} onDone={job.reload} />}
          <JobFacts job={j} />
          <section aria-labelledby="payload-title">
            <h2 id="payload-title">Payload</h2>
            <pre class="json" data-testid="payload">
              {json(j.payload)}
            </pre>
          </section>
          {j.progress !== null && j.progress !== undefined && (
            <section aria-labelledby="progress-title">
              <h2 id="progress-title">Progress</h2>
              <p class="muted">What the worker last reported with a renewal.</p>
              <pre class="json" data-testid="progress">
                {json(j.progress)}
              </pre>
            </section>
          )}
          {j.state === 'completed' && (
            <section aria-labelledby="result-title">
              <h2 id="result-title">Result</h2>
              <pre class="json">{json(j.result)}</pre>
            </section>
          )}
          <Errors job={j} />
          <Dependencies job={j} />
          {j.meta !== null && j.meta !== undefined && (
            <section aria-labelledby="meta-title">
              <h2 id="meta-title">Metadata</h2>
              <p class="muted">
                Kept with the job: for a message sent through the SQS endpoint, its attributes.
              </p>
              <pre class="json">{json(j.meta)}</pre>
            </section>
          )}
        </>
      )}
    </>
  );
}

function JobFacts({ job: j }: { job: Job }) {
  const rows: [string, string | preact.JSX.Element][] = [
    ['Queue', <a href={href('/queues', j.queue)}>{j.queue}</a>],
    [
      'Group',
      j.group === null ? 'none' : <a href={href('/queues', j.queue, 'groups', j.group)}>{j.group}</a>,
    ],
    ['State', j.state + (j.dead_reason ? ` (${j.dead_reason.replaceAll('_', ' ')})` : '')],
    ['Attempts', `${j.attempts} of ${j.max_attempts}`],
    ['Priority', String(j.priority)],
    ['Enqueued', time(j.created_at)],
    [runAtLabel(j), time(j.run_at)],
  ];
  if (j.claimed_at) rows.push(['Last claimed', time(j.claimed_at)]);
  if (j.state === 'claimed') {
    rows.push(['Lease holder', j.worker_id ?? '(no worker id given)']);
    rows.push(['Lease expires', time(j.lease_expires_at)]);
    if (j.deadline_at) rows.push(['Attempt deadline', time(j.deadline_at)]);
  } else if (j.worker_id) rows.push(['Last worker', j.worker_id]);
  if (j.timeout_ms !== null) rows.push(['Budget per attempt', period(j.timeout_ms)]);
  if (j.expires_at) rows.push(['Expires unless claimed by', time(j.expires_at)]);
  if (j.unique_key) rows.push(['Unique key', j.unique_key]);
  if (j.finished_at) rows.push(['Finished', time(j.finished_at)]);
  if (j.idempotency_key) rows.push(['Idempotency key', j.idempotency_key]);
  if (j.traceparent) rows.push(['Trace (traceparent)', j.traceparent]);
  if (j.tracestate) rows.push(['Trace state (tracestate)', j.tracestate]);
  return <Facts rows={rows} look="settings" />;
}

function Errors({ job: j }: { job: Job }) {
  return (
    <section aria-labelledby="errors-title">
      <h2 id="errors-title">Failed attempts</h2>
      {j.errors.length === 0 ? (
        <p>None.</p>
      ) : (
        <Scroll label="Failed attempts">
          <table class="errors">
            <caption class="visually-hidden">Failed attempts, oldest first</caption>
            <thead>
              <tr>
                <th scope="col">Attempt</th>
                <th scope="col">When</th>
                <th scope="col">Worker</th>
                <th scope="col">Error</th>
              </tr>
            </thead>
            <tbody>
              {j.errors.map((e) => (
                <tr key={`${e.attempt}-${e.at}`}>
                  <th scope="row">{e.attempt}</th>
                  <td>{time(e.at)}</td>
                  <td class="name">{e.worker_id ?? '—'}</td>
                  <td class="message">
                    {e.message}
                    {e.details !== undefined && <Details details={e.details} />}
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

/** What a job's run_at means in its state: a failed attempt's retry is named as one. */
function runAtLabel(j: Job): string {
  if (j.state === 'scheduled') return j.last_error ? 'Next retry' : 'Runs at';
  if (j.state === 'ready') return j.last_error ? 'Retry due since' : 'Ready since';
  return 'Was due';
}

/**
 * A failed attempt's details, folded to their first line (a stack's is its error): a stack sent as a
 * list of lines, or as one text with line breaks, unfolds as lines; anything else as JSON.
 */
function Details({ details }: { details: unknown }) {
  const lines = linesOf(details);
  const first = lines[0] ?? '';
  return (
    <details class="error-details">
      <summary>{first.length > 120 ? `${first.slice(0, 117)}…` : first}</summary>
      <pre class="json">{lines.join('\n')}</pre>
    </details>
  );
}

function linesOf(details: unknown): string[] {
  const asLines = (v: unknown): string[] | undefined =>
    typeof v === 'string'
      ? v.split('\n')
      : Array.isArray(v) && v.every((l) => typeof l === 'string')
        ? (v as string[])
        : undefined;
  const direct = asLines(details);
  if (direct) return direct;
  if (details !== null && typeof details === 'object' && 'stack' in details) {
    const { stack, ...rest } = details as { stack: unknown };
    const lines = asLines(stack);
    if (lines) return Object.keys(rest).length === 0 ? lines : [...lines, '', ...json(rest).split('\n')];
  }
  return json(details).split('\n');
}

/**
 * A job's place in a workflow: a drawing of its graph (up to the 100 jobs nearest to it), then its
 * parents (with the outcome each dependency recorded) and its children, each with its state now:
 * the first 100 of each, linked to their pages.
 */
function Dependencies({ job: j }: { job: Job }) {
  const { api } = useSession();
  const related = usePoll(
    async (signal) => {
      const path = { params: { path: { id: j.id } }, signal };
      const [parents, children, graph] = await Promise.all([
        must(api.GET('/v1/jobs/{id}/parents', path)),
        must(api.GET('/v1/jobs/{id}/children', path)),
        must(api.GET('/v1/jobs/{id}/graph', path)),
      ]);
      return { parents, children, graph };
    },
    REFRESH_MS,
    [api, j.id],
  );
  const r = related.data;
  if (!r || (r.parents.jobs.length === 0 && r.children.jobs.length === 0)) return null;
  const d = j.dependencies;
  return (
    <section aria-labelledby="deps-title">
      <h2 id="deps-title">Dependencies</h2>
      {d && (
        <p data-testid="dependencies">
          Waits for {d.parents} {d.parents === 1 ? 'parent' : 'parents'}: {d.parents_pending} not finished,{' '}
          {d.parents_failed} failed. If a parent fails:{' '}
          {d.on_parent_failure === 'run' ? 'run anyway' : 'cancel'}.
        </p>
      )}
      <JobGraph graph={r.graph} current={j.id} />
      <RelatedList title="Parents" jobs={r.parents.jobs} more={r.parents.next_cursor !== null} />
      <RelatedList title="Children" jobs={r.children.jobs} more={r.children.next_cursor !== null} />
    </section>
  );
}

function RelatedList({ title, jobs, more }: { title: string; jobs: RelatedJob[]; more: boolean }) {
  if (jobs.length === 0) return null;
  return (
    <>
      <h3>{title}</h3>
      <ul class="related" aria-label={title}>
        {jobs.map((r) => (
          <li key={r.id}>
            <a href={href('/jobs', r.id)}>Job {r.id}</a> ({r.queue}){' '}
            {r.state ? <StateBadge state={r.state} /> : <span class="muted">pruned</span>}
          </li>
        ))}
      </ul>
      {more && <p class="muted">Only the first {jobs.length} are shown.</p>}
    </>
  );
}
