import { useState } from 'preact/hooks';
import { type BatonClient, type BulkMatch, type Job, must } from '../api.js';
import { clock, count, plural } from '../format.js';
import { href } from '../router.js';
import { useSession } from '../session.js';
import { type Action, useActions } from './actions.js';
import { StateBadge } from './bits.js';

type BulkAnswer = Awaited<ReturnType<typeof bulk>>;
export type BulkDone = BulkAnswer & { verb: string };

const LIVE = new Set(['waiting', 'scheduled', 'ready', 'claimed']);
const FINISHED = new Set(['completed', 'dead', 'cancelled']);

type BulkAction = 'redrive' | 'run_now' | 'cancel' | 'delete';

export const bulk = (api: BatonClient, action: BulkAction, jobs: { ids: string[] } | { match: BulkMatch }) =>
  must(api.POST('/v1/jobs/bulk', { body: { action, ...jobs } }));

/** Every job of a failure list, as counted (GET /v1/jobs?count=true): what "select all" selects. */
export interface ListMatch {
  match: BulkMatch & { until: string };
  total: number;
  /** More than `total` (the server's cap) match: one action takes the first `total`. */
  capped: boolean;
}

/** "3 ready, 1 claimed": the states of jobs, for a confirmation. */
function states(jobs: Job[]): string {
  const by = new Map<string, number>();
  for (const j of jobs) by.set(j.state, (by.get(j.state) ?? 0) + 1);
  return [...by].map(([state, n]) => `${count(n)} ${state}`).join(', ');
}

/**
 * What an admin can do to the jobs selected in a list (POST /v1/jobs/bulk): redrive the dead ones,
 * run the scheduled ones now, cancel the live ones, delete the finished ones. Each confirmation counts the jobs it applies to and
 * names those it leaves alone; the jobs are sent as they were when selected, and the answer says,
 * job by job, what the server did (`onDone`), since a job may have moved meanwhile.
 */
export function bulkActions(api: BatonClient, selected: Job[], onDone: (answer: BulkDone) => void): Action[] {
  const make = (
    action: BulkAction,
    label: string,
    applies: (j: Job) => boolean,
    what: string,
    /** What happens to them, said of one job or of several. */
    effect: (one: boolean) => string,
    danger: boolean,
  ): Action => {
    const picked = selected.filter(applies);
    const others = selected.filter((j) => !applies(j));
    const verb = label.toLowerCase();
    return {
      label: `${label} selected`,
      name: `${label} ${plural(picked.length, 'selected job')}`,
      consequence:
        `${plural(picked.length, `${what} job`)} ${effect(picked.length === 1)}` +
        (others.length === 1
          ? `; the other job (${states(others)}) is left as it is`
          : others.length > 1
            ? `; the other ${plural(others.length, 'job')} (${states(others)}) are left as they are`
            : '') +
        '.',
      confirm: `${label} ${plural(picked.length, 'job')}`,
      danger,
      ...(picked.length === 0
        ? {
            unavailable: selected.length === 0 ? 'Select jobs first' : `None of the selected jobs is ${what}`,
          }
        : {}),
      run: async () => {
        const answer = await bulk(api, action, { ids: picked.map((j) => j.id) });
        onDone({ ...answer, verb });
        return (
          `${label}: ${count(answer.done)} of ${plural(picked.length, 'job')} done` +
          (answer.failed > 0 ? `, ${count(answer.failed)} not (see below).` : '.')
        );
      },
    };
  };
  return [
    make(
      'redrive',
      'Redrive',
      (j) => j.state === 'dead',
      'dead',
      (one) => `${one ? 'goes' : 'go'} back to ready with fresh attempts (error history kept)`,
      false,
    ),
    make(
      'run_now',
      'Run now',
      (j) => j.state === 'scheduled',
      'scheduled',
      (one) =>
        `${one ? 'becomes' : 'become'} ready now: a retry’s backoff or a delay is cut short (attempts and errors kept)`,
      false,
    ),
    make(
      'cancel',
      'Cancel',
      (j) => LIVE.has(j.state),
      'live',
      () => 'will not run; a claimed one’s worker loses its lease. This cannot be undone',
      true,
    ),
    make(
      'delete',
      'Delete',
      (j) => FINISHED.has(j.state),
      'finished',
      (one) =>
        `${one ? 'is' : 'are'} deleted for good, with the idempotency key that named ${one ? 'it' : 'them'}. This cannot be undone`,
      true,
    ),
  ];
}

/**
 * What an admin can do to every job of a list (POST /v1/jobs/bulk with `match`): the dead ones are
 * redriven or deleted, the failing ones run now (those waiting for a retry) or cancelled. The
 * confirmation gives the count and its time: the action takes the jobs that failed by then, and
 * leaves alone those that fail while the operator reads it.
 */
export function matchActions(
  api: BatonClient,
  every: ListMatch,
  onDone: (answer: BulkDone) => void,
): Action[] {
  const { match, total, capped } = every;
  const jobs = `${capped ? 'the newest ' : ''}${plural(total, `${match.state} job`)}${capped ? ' (of more)' : ''} matching, as of ${clock(match.until)},`;
  const make = (action: BulkAction, label: string, effect: string, danger: boolean): Action => ({
    label: `${label} all`,
    name: `${label} all ${plural(total, 'matching job')}`,
    consequence: `${jobs} ${effect}.`,
    confirm: `${label} ${plural(total, 'job')}`,
    danger,
    run: async () => {
      const answer = await bulk(api, action, { match });
      onDone({ ...answer, verb: label.toLowerCase() });
      return (
        `${label}: ${count(answer.done)} of ${plural(answer.results.length, 'job')} done` +
        (answer.failed > 0 ? `, ${count(answer.failed)} not (see below)` : '') +
        (answer.more ? '; more match, select them again for the rest.' : '.')
      );
    },
  });
  return match.state === 'dead'
    ? [
        make('redrive', 'Redrive', 'go back to ready with fresh attempts (error history kept)', false),
        make(
          'delete',
          'Delete',
          'are deleted for good, with the idempotency keys that named them. This cannot be undone',
          true,
        ),
      ]
    : [
        make(
          'run_now',
          'Run now',
          'that wait for a retry become ready now (those already ready or running are left as they are)',
          false,
        ),
        make(
          'cancel',
          'Cancel',
          'will not run; a running one’s worker loses its lease. This cannot be undone',
          true,
        ),
      ];
}

/** Rows of a long answer shown: past this, only the jobs the action was not done to. */
const RESULT_ROWS = 100;

/** The server's answer to a bulk action, job by job. */
export function BulkResults({ answer }: { answer: BulkDone }) {
  const long = answer.results.length > RESULT_ROWS;
  const rows = long
    ? answer.results
        .filter((r) => r.outcome === 'not_found' || r.outcome === 'invalid_state')
        .slice(0, RESULT_ROWS)
    : answer.results;
  return (
    <section class="bulk-results" aria-label="Result per job">
      <table>
        <caption>
          What {answer.verb} did to each job: {count(answer.done)} done, {count(answer.failed)} not
          {long &&
            (answer.failed > RESULT_ROWS ? ` (the first ${RESULT_ROWS} of those listed)` : ' (those listed)')}
        </caption>
        <thead>
          <tr>
            <th scope="col">Job</th>
            <th scope="col">Result</th>
            <th scope="col">State now</th>
          </tr>
        </thead>
        <tbody>
          {rows.map((r) => (
            <tr key={r.id}>
              <th scope="row">
                <a href={href('/jobs', r.id)}>{r.id}</a>
              </th>
              <td class="message">
                {r.outcome.replace('_', ' ')}
                {r.message && <span class="muted"> — {r.message}</span>}
              </td>
              <td>{r.state === null ? <span class="muted">gone</span> : <StateBadge state={r.state} />}</td>
            </tr>
          ))}
        </tbody>
      </table>
    </section>
  );
}

/** The jobs an operator has ticked in a list, as they were when ticked. */
export function useSelection() {
  const [selected, setSelected] = useState<Map<string, Job>>(new Map());
  return {
    selected,
    size: selected.size,
    has: (id: string) => selected.has(id),
    toggle: (jobs: Job[], on: boolean) =>
      setSelected((s) => {
        const next = new Map(s);
        for (const job of jobs) {
          if (on) next.set(job.id, job);
          else next.delete(job.id);
        }
        return next;
      }),
    clear: () => setSelected(new Map()),
  };
}
export type Selection = ReturnType<typeof useSelection>;

/**
 * A list's selection tools for admins: how many are ticked (or that every job of the list is), the
 * bulk actions, their confirmation and status line, and the result per job of the last action.
 * `onDone` reloads the list.
 */
export function BulkBar({
  selection,
  every,
  onDone,
}: {
  selection: Selection;
  /** Every job of the list is selected, not only the ticked ones. */
  every?: ListMatch | undefined;
  onDone: () => void;
}) {
  const { api } = useSession();
  const [answer, setAnswer] = useState<BulkDone | undefined>();
  const run = useActions(onDone);
  const done = (answer: BulkDone) => {
    setAnswer(answer);
    selection.clear();
  };
  const actions = every
    ? matchActions(api, every, done)
    : bulkActions(api, [...selection.selected.values()], done);
  return (
    <>
      <div class="actions">
        <div class="buttons">
          <span class="selected-count">
            {count(every ? every.total : selection.size)}
            {every?.capped ? '+' : ''} selected
          </span>
          {actions.map(run.button)}
        </div>
        {run.status}
        {run.dialog}
      </div>
      {answer && <BulkResults answer={answer} />}
    </>
  );
}

/** The header cell that ticks every job of the page. */
export function SelectAllCell({ selection, jobs }: { selection: Selection; jobs: Job[] }) {
  return (
    <th scope="col" class="select">
      <input
        type="checkbox"
        aria-label="Select every job on this page"
        checked={jobs.length > 0 && jobs.every((j) => selection.has(j.id))}
        onChange={(e) => selection.toggle(jobs, e.currentTarget.checked)}
      />
    </th>
  );
}

export function SelectCell({ selection, job }: { selection: Selection; job: Job }) {
  return (
    <td class="select">
      <input
        type="checkbox"
        aria-label={`Select job ${job.id}`}
        checked={selection.has(job.id)}
        onChange={(e) => selection.toggle([job], e.currentTarget.checked)}
      />
    </td>
  );
}
