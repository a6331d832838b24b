import type { BackoffPolicy } from '../queues/queue-settings.js';

/**
 * Delay before retrying a job whose attempt number `attempt` (1-based) failed: exponential
 * (base, 2×base, 4×base, ...) capped at maxMs. With jitter, a random point between half and all of
 * that ("equal jitter"), so a burst of failures does not come back as a burst of retries.
 */
export function retryDelayMs(
  attempt: number,
  policy: BackoffPolicy,
  random: () => number = Math.random,
): number {
  const exponent = Math.min(Math.max(attempt - 1, 0), 52);
  const full = Math.min(policy.maxMs, policy.baseMs * 2 ** exponent);
  if (!policy.jitter) return Math.round(full);
  return Math.round(full / 2 + random() * (full / 2));
}
