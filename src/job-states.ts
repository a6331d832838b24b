/**
 * Job states, declared once. The database enforces the same sets with CHECK constraints on
 * baton.jobs (live) and baton.job_history (finished); a test keeps the two in step.
 *
 * Live states (rows in baton.waiting_jobs, baton.scheduled_jobs and the ring, baton.jobs):
 * - `waiting`: enqueued with `depends_on`, some parent not finished yet (baton.waiting_jobs, never in
 *   the ring or the claim index). In: enqueue with a parent still live; a redrive of a dead parent
 *   brings back the children its death cancelled (a release step of its `redriven` event). Out, by the
 *   release step that applies its last parent's finish (the trigger on baton.job_history files an
 *   event; baton.release_step, migration 0019, applies it soon after, a thousand children a step),
 *   exactly once: to `ready` (or `scheduled`, when its run_at is ahead) once every parent has
 *   completed, or has failed under the policy `run`; to `cancelled` (last_error reason
 *   `parent_failed`) as soon as a parent goes dead, is cancelled or expires under the policy
 *   `cancel`; cancel (a user's, purge, forced queue delete).
 * - `scheduled`: waiting for run_at. In: enqueue with a future run_at or delay; nack with a retry
 *   delay. Out: the leader's promoter (run_at reached) to `ready`; cancel; the expiry sweep.
 * - `ready`: claimable now; the only rows in the claim index. In: enqueue due now, promotion,
 *   re-arm of an expired lease, nack with no delay, redrive. Out: claim; cancel; the expiry sweep
 *   (dead, reason expired) once past expires_at, which claims already skip.
 * - `claimed`: held by a worker under a lease token until lease_expires_at. In: claim.
 *   Out: ack (completed), nack (scheduled, ready or dead), the leader's re-arm of an expired lease
 *   (ready, or dead when attempts are exhausted), cancel. Renew keeps it here. With a budget per
 *   attempt (timeout_ms) the lease is capped at deadline_at, so the re-arm also fails the attempt
 *   at its deadline (error reason deadline_exceeded).
 *
 * Finished states (rows in baton.job_history; terminal, pruned after retention):
 * - `completed`: acked by the worker holding the current lease.
 * - `dead`: attempts exhausted, nacked with `dead: true`, lease expired (or the attempt's deadline
 *   passed) on the last attempt, or expired before any claim (expires_at, the leader's expiry sweep);
 *   `dead_reason` says which. Out: redrive (back to `ready`, attempts reset).
 * - `cancelled`: cancelled by a user (or a forced queue delete, or purge); a waiting job whose parent
 *   failed under the policy `cancel` (last_error reason `parent_failed`; a redrive of that parent
 *   brings it back to `waiting`); or a job with a unique key
 *   that came back to waiting while a newer job held the key, and gave way to it (last_error reason
 *   `superseded`, jobs/unique-return.ts).
 */
export const LIVE_STATES = ['waiting', 'scheduled', 'ready', 'claimed'] as const;
export const FINISHED_STATES = ['completed', 'dead', 'cancelled'] as const;
export const JOB_STATES = [...LIVE_STATES, ...FINISHED_STATES] as const;

export type LiveState = (typeof LIVE_STATES)[number];
export type FinishedState = (typeof FINISHED_STATES)[number];
export type JobState = (typeof JOB_STATES)[number];

/** Why a job is dead, recorded in job_history.dead_reason. */
export const DEAD_REASONS = [
  'lease_expired',
  'attempts_exhausted',
  'nacked_dead',
  'deadline_exceeded',
  'expired',
] as const;
export type DeadReason = (typeof DEAD_REASONS)[number];

export function isLiveState(state: string): state is LiveState {
  return (LIVE_STATES as readonly string[]).includes(state);
}
