import { sql } from 'kysely';
import type { Db } from '../db/database.js';
import { queueVisible } from '../db/queue-patterns.js';
import type { JobState } from '../job-states.js';
import type { ParentFailurePolicy } from './enqueue/item.js';
import type { ParentScope } from './enqueue/parents.js';

/**
 * Reads of the dependency graph (baton.job_edges, migration 0016): a job's summary, its parents (with
 * their results: what a claimed child reads to fan in) and its children, each a keyset page by id.
 * Plain reads: no lock, one short statement per page.
 */

/** A job's dependencies as its page shows them; undefined for a job without parents. */
export interface DependencySummary {
  parents: number;
  /** Parents not finished yet (the job waits while this is above 0). */
  parents_pending: number;
  /** Parents that went dead, were cancelled or expired. */
  parents_failed: number;
  on_parent_failure: ParentFailurePolicy;
}

/**
 * With `scope` (a queue-limited key's patterns), only the parents in queues the caller may see are
 * counted, as GET /v1/jobs/{id}/parents lists them: an edge an admin made to another tenant's job
 * tells the key neither that job's existence nor its outcome.
 */
export async function dependencySummary(
  db: Db,
  id: string,
  scope: ParentScope,
): Promise<DependencySummary | undefined> {
  const { rows } = await sql<DependencySummary & { parents: string }>`
    SELECT count(*)::integer AS parents,
           (count(*) FILTER (WHERE parent_outcome IS NULL))::integer AS parents_pending,
           (count(*) FILTER (WHERE parent_outcome IN ('dead', 'cancelled')))::integer AS parents_failed,
           min(on_parent_failure) AS on_parent_failure
    FROM baton.job_edges WHERE child = ${id}::bigint AND ${queueVisible('parent_queue', scope)}
    HAVING count(*) > 0`.execute(db);
  return rows[0];
}

/** A job at the other end of an edge, in whatever state it is now. */
export interface RelatedJob {
  id: string;
  queue: string;
  /** Its state now; null when it is gone (pruned past its retention). */
  state: JobState | null;
  /** The parent's outcome as the edge recorded it (null while the parent is live). */
  parent_outcome: 'completed' | 'dead' | 'cancelled' | null;
  /** A completed parent's result (parents only; null otherwise). */
  result: unknown;
  finished_at: Date | null;
}

export interface RelatedPage {
  jobs: RelatedJob[];
  /** The last id of this page when there may be more. */
  next: string | undefined;
}

/**
 * The parents (`direction` 'parents') or children of a job, by id after `after`, `limit` a page. With
 * `scope`, only jobs of queues the caller may see (a queue-limited key's patterns).
 */
export async function relatedJobs(
  db: Db,
  id: string,
  direction: 'parents' | 'children',
  opts: { after?: string; limit: number; scope: ParentScope },
): Promise<RelatedPage> {
  const parents = direction === 'parents';
  const [self, other, otherQueue] = parents
    ? [sql.ref('e.child'), sql.ref('e.parent'), 'e.parent_queue']
    : [sql.ref('e.parent'), sql.ref('e.child'), 'e.child_queue'];
  const visible = queueVisible(otherQueue, opts.scope);
  // Each related job is looked up where it can be by id: live tables, then history (whose result a
  // fan-in reads). The edges are read on their primary key (child, parent) or job_edges_parent_idx.
  const { rows } = await sql<RelatedJob>`
    SELECT ${other}::text AS id, ${sql.ref(otherQueue)} AS queue, e.parent_outcome,
           coalesce(
             (SELECT j.state FROM baton.jobs j WHERE j.id = ${other}),
             (SELECT 'scheduled' FROM baton.scheduled_jobs s WHERE s.id = ${other}),
             (SELECT 'waiting' FROM baton.waiting_jobs w WHERE w.id = ${other}),
             h.state) AS state,
           ${parents ? sql`h.result` : sql`NULL::jsonb`} AS result, h.finished_at
    FROM baton.job_edges e
    LEFT JOIN LATERAL (SELECT h.state, h.result, h.finished_at FROM baton.job_history h WHERE h.id = ${other} LIMIT 1) h
      ON true
    WHERE ${self} = ${id}::bigint AND ${visible}
      ${opts.after === undefined ? sql`` : sql`AND ${other} > ${opts.after}::bigint`}
    ORDER BY ${other}
    LIMIT ${opts.limit + 1}`.execute(db);
  const more = rows.length > opts.limit;
  const page = more ? rows.slice(0, opts.limit) : rows;
  return { jobs: page, next: more ? page[page.length - 1]!.id : undefined };
}
