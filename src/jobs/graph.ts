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

/** A job of a workflow graph, in its state now (null: pruned past its retention). */
export interface GraphJob {
  id: string;
  queue: string;
  state: JobState | null;
}

export interface JobGraph {
  jobs: GraphJob[];
  /** Dependencies between the jobs returned (parent must finish before child runs). */
  edges: { parent: string; child: string }[];
  /** The graph reaches further than the jobs returned. */
  truncated: boolean;
}

/**
 * The workflow graph a job belongs to: the jobs reached from it along dependencies in either
 * direction, nearest first, up to `limit`, with the edges among them. With `scope`, the walk goes
 * only through jobs of queues the caller may see.
 *
 * Why one bounded walk: a graph may be a fan-out of a million children (jobs/enqueue/graph-plan.ts
 * allows it), so the read must cost what it returns, not what the graph holds. A recursive UNION
 * is evaluated only as far as the outer LIMIT pulls it, and each step reads the edges of one job in
 * index order with a LIMIT (job_edges_parent_idx for children, the primary key (child, parent) for
 * parents). Without the ORDER BY and LIMIT, statistics skewed by one huge fan-out led the planner to
 * a sequential scan for each job reached (edges all one parent's 1,000,000 children: 15 ms a step);
 * with them, a walk of 101 jobs from a 1,000,000-child hub among 200,000 other edges took 0.5 ms.
 * UNION (not UNION ALL) stops the walk on
 * jobs already reached: walked both ways, a diamond is a cycle. Each job's parents among those
 * returned are read on the primary key: at most MAX_PARENTS per job.
 */
export async function jobGraph(
  db: Db,
  start: { id: string; queue: string },
  opts: { limit: number; scope: ParentScope },
): Promise<JobGraph> {
  const { rows } = await sql<GraphJob & { parents: string[] }>`
    WITH RECURSIVE reach(id, queue) AS (
      SELECT ${start.id}::bigint, ${start.queue}::text
      UNION
      SELECT n.id, n.queue FROM reach r
      CROSS JOIN LATERAL (
        (SELECT e.child AS id, e.child_queue AS queue FROM baton.job_edges e
         WHERE e.parent = r.id AND ${queueVisible('e.child_queue', opts.scope)}
         ORDER BY e.parent, e.child LIMIT ${opts.limit + 1})
        UNION ALL
        (SELECT e.parent, e.parent_queue FROM baton.job_edges e
         WHERE e.child = r.id AND ${queueVisible('e.parent_queue', opts.scope)}
         ORDER BY e.child, e.parent LIMIT ${opts.limit + 1})
      ) n
    ), nodes AS MATERIALIZED (
      SELECT id, queue FROM reach LIMIT ${opts.limit + 1}
    )
    SELECT n.id::text AS id, n.queue,
           coalesce(
             (SELECT j.state FROM baton.jobs j WHERE j.id = n.id),
             (SELECT 'scheduled' FROM baton.scheduled_jobs s WHERE s.id = n.id),
             (SELECT 'waiting' FROM baton.waiting_jobs w WHERE w.id = n.id),
             (SELECT h.state FROM baton.job_history h WHERE h.id = n.id LIMIT 1)) AS state,
           ARRAY(SELECT e.parent::text FROM baton.job_edges e
                 WHERE e.child = n.id AND e.parent = ANY(ARRAY(SELECT id FROM nodes))) AS parents
    FROM nodes n`.execute(db);
  const truncated = rows.length > opts.limit;
  const kept = truncated ? rows.slice(0, opts.limit) : rows;
  const ids = new Set(kept.map((r) => r.id));
  const edges = kept.flatMap((r) =>
    r.parents.filter((p) => ids.has(p)).map((parent) => ({ parent, child: r.id })),
  );
  return { jobs: kept.map(({ id, queue, state }) => ({ id, queue, state })), edges, truncated };
}
