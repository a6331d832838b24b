import { type BatonClient, type Job, must } from '../api.js';
import { count, plural } from '../format.js';
import { href } from '../router.js';
import type { Action } from './actions.js';
import { StateBadge } from './bits.js';

type BulkAnswer = Awaited<ReturnType<typeof bulk>>;
export type BulkDone = BulkAnswer & { verb: string };

const LIVE = new Set(['waiting', 'scheduled', 'ready', 'claimed']);
const FINISHED = new Set(['completed', 'dead', 'cancelled']);

const bulk = (api: BatonClient, action: 'redrive' | 'cancel' | 'delete', ids: string[]) =>
  must(api.POST('/v1/jobs/bulk', { body: { action, ids } }));

/** "3 ready, 1 claimed": the states of jobs, for a confirmation. */
function states(jobs: Job[]): string {
  const by = new Map<string, number>();
  for (const j of jobs) by.set(j.state, (by.get(j.state) ?? 0) + 1);
  return [...by].map(([state, n]) => `${count(n)} ${state}`).join(', ');
}

/**
 * What an admin can do to the jobs selected in a list (POST /v1/jobs/bulk): redrive the dead ones,
 * cancel the live ones, delete the finished ones. Each confirmation counts the jobs it applies to and
 * names those it leaves alone; the jobs are sent as they were when selected, and the answer says,
 * job by job, what the server did (`onDone`), since a job may have moved meanwhile.
 */
export function bulkActions(api: BatonClient, selected: Job[], onDone: (answer: BulkDone) => void): Action[] {
  const make = (
    action: 'redrive' | 'cancel' | 'delete',
    label: string,
    applies: (j: Job) => boolean,
    what: string,
    effect: string,
    danger: boolean,
  ): Action => {
    const picked = selected.filter(applies);
    const others = selected.filter((j) => !applies(j));
    const verb = label.toLowerCase();
    return {
      label: `${label} selected`,
      name: `${label} ${plural(picked.length, 'selected job')}`,
      consequence:
        `${plural(picked.length, `${what} job`)} ${effect}` +
        (others.length > 0
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
        const answer = await bulk(
          api,
          action,
          picked.map((j) => j.id),
        );
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
      'go back to ready with fresh attempts (their error history is kept)',
      false,
    ),
    make(
      'cancel',
      'Cancel',
      (j) => LIVE.has(j.state),
      'live',
      'will not run; a claimed one’s worker loses its lease. This cannot be undone',
      true,
    ),
    make(
      'delete',
      'Delete',
      (j) => FINISHED.has(j.state),
      'finished',
      'are deleted for good, with the idempotency keys that named them. This cannot be undone',
      true,
    ),
  ];
}

/** The server's answer to a bulk action, job by job. */
export function BulkResults({ answer }: { answer: BulkDone }) {
  return (
    <section class="bulk-results" aria-label="Result per job">
      <table>
        <caption>
          What {answer.verb} did to each job: {count(answer.done)} done, {count(answer.failed)} not
        </caption>
        <thead>
          <tr>
            <th scope="col">Job</th>
            <th scope="col">Result</th>
            <th scope="col">State now</th>
          </tr>
        </thead>
        <tbody>
          {answer.results.map((r) => (
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
