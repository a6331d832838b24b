import { DomainError } from '../errors.js';
import { FINISHED_STATES, type JobState, LIVE_STATES } from '../job-states.js';
import { deleteFinishedJobs } from '../jobs/delete-finished.js';
import type { JobRow } from '../jobs/job-row.js';
import { BULK_MATCH_MAX, MAX_BATCH } from '../jobs/limits.js';
import { getVisibleJobs } from '../jobs/read.js';
import { runScheduledNow } from '../jobs/run-now.js';
import { type FailureKey, type FailureListOptions, listFailures } from '../jobs/search.js';
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

/** The jobs of an operator's list: GET /v1/jobs's filters, a key's patterns, and `until`. */
export type BulkMatch = Omit<FailureListOptions, 'limit' | 'after'>;

const DONE: Record<BulkAction, BulkOutcome> = {
  redrive: 'redriven',
  run_now: 'ready_now',
  cancel: 'cancelled',
  delete: 'deleted',
};

/** The states each action applies to, and what a job in another state is told. */
const APPLIES: Record<BulkAction, { states: ReadonlySet<JobState>; only: string }> = {
  redrive: { states: new Set(['dead']), only: 'only a dead job is redriven' },
  run_now: {
    states: new Set(['scheduled']),
    only: "only a scheduled job (a delay or a retry's backoff) is run now",
  },
  cancel: { states: new Set(LIVE_STATES), only: 'only a live job is cancelled' },
  delete: { states: new Set(FINISHED_STATES), only: 'cancel it first, only a finished job is deleted' },
};

/**
 * One action on jobs an operator picked (POST /v1/jobs/bulk, the dashboard's selections), with a
 * result per job. Each action is the one the single-job paths use (a queue's redrive by ids, the
 * promoter's move of a scheduled job, the cancel, and the delete of finished jobs), so the same
 * rules, counts and wake-ups apply; what is added is the per-job answer: each job's outcome is what
 * its own statement did, never inferred from a count, so two operators acting on the same jobs at
 * once each see which jobs they moved.
 *
 * With `patterns` (a queue-limited key) a job of another tenant is not_found, as it is to a read: the
 * jobs are first read under the patterns, and each action's statement is bounded by them or by the
 * queue that read found.
 */
export class BulkActions {
  constructor(
    private readonly deps: ServiceDeps,
    private readonly leases: LeaseUseCases,
    private readonly queues: QueueUseCases,
  ) {}

  async run(action: BulkAction, ids: string[], patterns?: string[]): Promise<BulkResult[]> {
    const { db } = this.deps;
    const rule = APPLIES[action];
    const picked: JobRow[] = [];
    /** Why the action was not done to a job it was asked of. */
    const refused = new Map<string, string>();
    for (const job of (await getVisibleJobs(db, ids, patterns)).values()) {
      if (rule.states.has(job.state)) picked.push(job);
      else refused.set(job.id, `job ${job.id} is ${job.state}; ${rule.only}`);
    }
    const done = new Set(
      action === 'redrive'
        ? await this.redrive(picked, refused)
        : action === 'run_now'
          ? await this.runNow(picked, patterns)
          : action === 'cancel'
            ? await this.cancel(picked, refused)
            : (await deleteFinishedJobs(db, idsOf(picked), patterns)).map((job) => job.id),
    );
    // Each job as it is now: the state it was left in, or why the action did not apply (read first,
    // right after the action: a claim waiting for these jobs takes them a moment later).
    const after = await getVisibleJobs(db, ids, patterns);
    // The figures an operator reads next show what was done (service/queues.ts, recount).
    await this.queues.recount([...new Set(picked.filter((j) => done.has(j.id)).map((j) => j.queue))]);
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

  /**
   * The action on every job of a list (dead or failing, with its filters) that failed at or before
   * `until`, newest first, up to BULK_MATCH_MAX jobs: the list is walked a page of MAX_BATCH at a
   * time and each page acted on as `run` does, so each job still gets its own outcome. `until` (the
   * time the operator's count was made; the call's time by default) leaves alone the jobs that fail while the action runs; a
   * job the action moves leaves the list or stays behind the walk's keyset, so none is met twice.
   * `more`: matching jobs were left because the cap was reached.
   */
  async runMatch(action: BulkAction, list: BulkMatch): Promise<{ results: BulkResult[]; more: boolean }> {
    const match = { ...list, until: list.until ?? new Date().toISOString() };
    const results: BulkResult[] = [];
    let after: FailureKey | undefined;
    for (;;) {
      const limit = Math.min(MAX_BATCH, BULK_MATCH_MAX - results.length);
      const page = await listFailures(this.deps.db, { ...match, limit, ...(after ? { after } : {}) });
      if (page.rows.length > 0) results.push(...(await this.run(action, idsOf(page.rows), match.patterns)));
      if (page.next === undefined) return { results, more: false };
      after = page.next;
      if (results.length >= BULK_MATCH_MAX) {
        const beyond = await listFailures(this.deps.db, { ...match, limit: 1, after });
        return { results, more: beyond.rows.length > 0 };
      }
    }
  }

  /** Dead jobs back to ready, by the queue's redrive of ids; answers those it moved. */
  private async redrive(jobs: JobRow[], refused: Map<string, string>): Promise<string[]> {
    const moved: string[] = [];
    const byQueue = new Map<string, string[]>();
    for (const job of jobs) byQueue.set(job.queue, [...(byQueue.get(job.queue) ?? []), job.id]);
    for (const [queue, queueIds] of byQueue) {
      try {
        await this.queues.redrive(queue, { ids: queueIds }, (batch) => moved.push(...batch));
      } catch (err) {
        // The queue is gone and the server creates none (BATON_AUTO_CREATE_QUEUES=false): its jobs stay dead.
        if (!(err instanceof DomainError)) throw err;
        for (const id of queueIds) refused.set(id, err.message);
      }
    }
    return moved;
  }

  /** Scheduled jobs ready now; waiting claims of their queues, here and on other replicas, are woken. */
  private async runNow(jobs: JobRow[], patterns?: string[]): Promise<string[]> {
    const moved = await runScheduledNow(this.deps.db, idsOf(jobs), patterns);
    const byQueue = new Map<string, number>();
    for (const { queue } of moved) byQueue.set(queue, (byQueue.get(queue) ?? 0) + 1);
    for (const [queue, n] of byQueue) this.deps.notifier.jobsReady(queue, n);
    return moved.map((job) => job.id);
  }

  /** Live jobs cancelled one by one, as the single cancel does (counted, awaiters and slots told). */
  private async cancel(jobs: JobRow[], refused: Map<string, string>): Promise<string[]> {
    const cancelled: string[] = [];
    for (const job of jobs) {
      try {
        // The job's queue bounds the statement (cancel.ts): under a limited key, only that queue.
        const { already } = await this.leases.cancelTelling(job.id, job.queue);
        if (already) refused.set(job.id, `job ${job.id} is already cancelled`);
        else cancelled.push(job.id);
      } catch (err) {
        if (!(err instanceof DomainError)) throw err;
        // Gone meanwhile (not_found, told below), or finished meanwhile (invalid_state).
        if (err.code !== 'not_found') refused.set(job.id, err.message);
      }
    }
    return cancelled;
  }
}

const idsOf = (jobs: JobRow[]) => jobs.map((job) => job.id);
