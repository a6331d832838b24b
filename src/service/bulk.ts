import { DomainError } from '../errors.js';
import { deleteFinishedJobs } from '../jobs/delete-finished.js';
import type { JobRow } from '../jobs/job-row.js';
import { getVisibleJobs } from '../jobs/read.js';
import { runScheduledNow } from '../jobs/run-now.js';
import { FINISHED_STATES, type JobState } from '../jobs/states.js';
import type { ServiceDeps } from './jobs.js';
import type { LeaseUseCases } from './leases.js';
import type { QueueUseCases } from './queues.js';

export const BULK_ACTIONS = ['redrive', 'run_now', 'cancel', 'delete'] as const;
export type BulkAction = (typeof BULK_ACTIONS)[number];

export const BULK_OUTCOMES = [
  'redriven',
  'ready_now',
  'cancelled',
  'deleted',
  'not_found',
  'invalid_state',
] as const;
export type BulkOutcome = (typeof BULK_OUTCOMES)[number];

export interface BulkResult {
  id: string;
  outcome: BulkOutcome;
  /** The job's state once the action is done; null when it is gone (deleted, or never found). */
  state: JobState | null;
  message?: string;
}

const DONE: Record<BulkAction, BulkOutcome> = {
  redrive: 'redriven',
  run_now: 'ready_now',
  cancel: 'cancelled',
  delete: 'deleted',
};
const FINISHED: ReadonlySet<JobState> = new Set(FINISHED_STATES);

/**
 * One action on jobs an operator picked (POST /v1/jobs/bulk, the dashboard's selections), with a
 * result per job. Each action is the one the single-job paths use (a queue's redrive by ids, the
 * promoter's move of a scheduled job, the cancel, and the delete of finished jobs), so the same
 * rules, counts and wake-ups apply; what is
 * added is the per-job answer: each job's outcome is what its own statement did, never inferred
 * from a count, so two operators acting on the same jobs at once each see which jobs they moved.
 *
 * With `patterns` (a queue-limited key) a job of another tenant is not_found, as it is to a read: the
 * jobs are first read under the patterns, and each action's statement is bounded to the queue that
 * read found.
 */
export class BulkActions {
  constructor(
    private readonly deps: ServiceDeps,
    private readonly leases: LeaseUseCases,
    private readonly queues: QueueUseCases,
  ) {}

  async run(action: BulkAction, ids: string[], patterns?: string[]): Promise<BulkResult[]> {
    const before = await this.visibleJobs(ids, patterns);
    const done = new Set<string>();
    const refused = new Map<string, string>();
    if (action === 'redrive') {
      const dead = new Map<string, string[]>();
      for (const job of before.values()) {
        if (job.state === 'dead') dead.set(job.queue, [...(dead.get(job.queue) ?? []), job.id]);
        else refused.set(job.id, `job ${job.id} is ${job.state}; only a dead job is redriven`);
      }
      for (const [queue, queueIds] of dead) {
        try {
          await this.queues.redrive(queue, { ids: queueIds }, (moved) => {
            for (const id of moved) done.add(id);
          });
        } catch (err) {
          // The queue is gone and the server creates none (BATON_AUTO_CREATE_QUEUES=false): its jobs stay dead.
          if (!(err instanceof DomainError)) throw err;
          for (const id of queueIds) refused.set(id, err.message);
        }
      }
    } else if (action === 'run_now') {
      const scheduled = [...before.values()].filter((job) => job.state === 'scheduled').map((job) => job.id);
      for (const job of before.values()) {
        if (job.state !== 'scheduled') {
          refused.set(
            job.id,
            `job ${job.id} is ${job.state}; only a scheduled job (a delay or a retry's backoff) is run now`,
          );
        }
      }
      const moved = await runScheduledNow(this.deps.db, scheduled, patterns);
      const byQueue = new Map<string, number>();
      for (const { id, queue } of moved) {
        done.add(id);
        byQueue.set(queue, (byQueue.get(queue) ?? 0) + 1);
      }
      // Waiting claims of those queues take them at once, here and on other replicas.
      for (const [queue, n] of byQueue) this.deps.notifier.jobsReady(queue, n);
    } else if (action === 'cancel') {
      for (const job of before.values()) {
        try {
          // The job's queue bounds the statement (cancel.ts): under a limited key, only that queue.
          const { already } = await this.leases.cancelTelling(job.id, job.queue);
          if (already) refused.set(job.id, `job ${job.id} is already cancelled`);
          else done.add(job.id);
        } catch (err) {
          if (!(err instanceof DomainError)) throw err;
          // Gone meanwhile (not_found below), or finished meanwhile (invalid_state).
          if (err.code !== 'not_found') refused.set(job.id, err.message);
        }
      }
    } else {
      const finished = [...before.values()].filter((job) => FINISHED.has(job.state)).map((job) => job.id);
      for (const job of before.values()) {
        if (!FINISHED.has(job.state)) {
          refused.set(
            job.id,
            `job ${job.id} is ${job.state}; cancel it first, only a finished job is deleted`,
          );
        }
      }
      for (const gone of await deleteFinishedJobs(this.deps.db, finished, patterns)) done.add(gone.id);
    }
    // Each job as it is now: the state it was left in, or why the action did not apply.
    const after = await this.visibleJobs(ids, patterns);
    return ids.map((id): BulkResult => {
      const state = after.get(id)?.state ?? null;
      if (done.has(id)) return { id, outcome: DONE[action], state };
      const message = refused.get(id);
      if (message !== undefined) return { id, outcome: 'invalid_state', state, message };
      // Gone between the read and the action (deleted, or pruned), or never visible to this key.
      if (state === null) return { id, outcome: 'not_found', state: null, message: `no job ${id}` };
      return {
        id,
        outcome: 'invalid_state',
        state,
        message: `job ${id} changed meanwhile: it is ${state} now`,
      };
    });
  }

  /** The jobs among `ids` that exist and the key may see, wherever they are now. */
  private visibleJobs(ids: string[], patterns?: string[]): Promise<Map<string, JobRow>> {
    return getVisibleJobs(this.deps.db, ids, patterns);
  }
}
