import type { FailureKind, FailureListOptions } from '../jobs/search.js';
import { toUtcTimestamp } from './timestamps.js';

/** A failure list as a request names it: GET /v1/jobs's query, or a bulk action's `match`. */
export interface FailureListFilters {
  state: FailureKind;
  since?: string | undefined;
  until?: string | undefined;
  queue?: string | undefined;
  group?: string | undefined;
  error?: string | undefined;
}

/**
 * The list's options for jobs/search.ts: times in UTC (the schema checked them), absent filters
 * left out (each combination is its own statement text), a queue-limited key's patterns kept.
 */
export function failureListOf(
  filters: FailureListFilters,
  patterns: string[] | undefined,
): Omit<FailureListOptions, 'limit' | 'after'> {
  const { state, since, until, queue, group, error } = filters;
  return {
    kind: state,
    ...(since === undefined ? {} : { since: toUtcTimestamp(since)! }),
    ...(until === undefined ? {} : { until: toUtcTimestamp(until)! }),
    ...(queue === undefined ? {} : { queue }),
    ...(group === undefined ? {} : { group }),
    ...(error === undefined ? {} : { error }),
    ...(patterns === undefined ? {} : { patterns }),
  };
}
