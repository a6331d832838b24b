/**
 * The claim's vocabulary: who claims (a claimant, a request), what a claim answers (claimed rows, and
 * whether a limit held some back). Types only: every file of the claim, and its callers, import them
 * from here, so none of them needs another claim file for a type.
 */

/** One claimant's part of a claim. */
export interface Claimant {
  maxJobs: number;
  /** Requested lease; undefined means the queue's setting. */
  leaseMs?: number;
  workerId?: string;
  /**
   * A group whose limit is one job at a time (group_concurrency_limit 1) and that has none claimed
   * gives this claimant its next jobs together, in claim order, up to maxJobs, before other groups
   * are served; none of its jobs is claimed again while any of them is. What an SQS FIFO queue's
   * receive does (sqs/actions/receive.ts). Without it, such a group gives one job per claim.
   */
  wholeGroups?: boolean;
}

/** A claim on a queue, as a request makes it. */
export interface ClaimRequest extends Claimant {
  queue: string;
}

/** A claim on its own, with the server default lease for queues that set none. */
export interface ClaimOptions extends ClaimRequest {
  defaultLeaseMs: number;
}

/** A claimed job, as every claim statement answers it (statement.ts, `claimedColumns`). */
export interface ClaimedRow {
  id: string;
  queue: string;
  group_key: string;
  /**
   * The payload as JSON text, as PostgreSQL prints the jsonb: the claim's answer splices it in
   * (http/claim-response.ts), so the server never parses or re-serialises a payload it does not read.
   */
  payload_json: string;
  priority: number;
  attempts: number;
  max_attempts: number;
  lease_token: string;
  lease_expires_at: Date;
  /** When this attempt's budget runs out (claimed_at + timeout), or null without one. */
  deadline_at: Date | null;
  claimed_at: Date;
  run_at: Date;
  created_at: Date;
  /** The job's metadata (baton.jobs.meta), or null. */
  meta: unknown;
}

/** Why a claim of a queue with flow control got fewer jobs than it asked for. */
export type LimitReason = 'concurrency' | 'rate' | 'group_concurrency' | 'group_rate' | 'group_paused';

export interface HeldBack {
  reason: LimitReason;
  /** When a rate limit frees a claim again (undefined: when a claimed job leaves). */
  retryAfterMs?: number;
}

/** One claimant's answer: its jobs, and whether a limit held some back. */
export interface ClaimOutcome {
  jobs: ClaimedRow[];
  heldBack?: HeldBack;
}

/**
 * The claims of a queue, from the cheapest: the plain statement (plain.ts), the grouped one
 * (grouped.ts), the limited one (limited.ts), and the walk's transaction (flow.ts). claim.ts routes
 * each claim to one of them.
 */
export type Route = 'plain' | 'grouped' | 'limited' | 'walk';
