import { sql } from 'kysely';
import type { Db } from '../db/database.js';

/**
 * Workers that announce themselves (migrations/0023_workers.ts): PUT /v1/workers/{id} records what a
 * worker says of itself, a claim naming it refreshes when it was last seen, and the Workers page lists
 * those seen lately with the jobs they hold, idle or busy. Nothing here is on a claim's path: the
 * refresh is a statement of its own, at most one per worker every few seconds (service/workers.ts).
 */
export interface WorkerRow {
  owner: string;
  id: string;
  host: string | null;
  pid: number | null;
  concurrency: number | null;
  version: string | null;
  queues: string[];
  started_at: Date;
  last_seen_at: Date;
  /** Jobs it holds under a lease now, in the queues it announced. */
  jobs: number;
  /** The first of them, oldest claim first (at most HELD_LISTED). */
  job_ids: string[];
}

export interface Announcement {
  owner: string;
  id: string;
  host: string | null;
  pid: number | null;
  concurrency: number | null;
  version: string | null;
  queues: string[];
}

/** Jobs listed per worker. */
export const HELD_LISTED = 10;

/** Record an announcement (again: a heartbeat); a worker that announces anew keeps its started_at. */
export async function announceWorker(db: Db, a: Announcement): Promise<void> {
  await sql`
    INSERT INTO baton.workers (owner, id, host, pid, concurrency, version, queues)
    VALUES (${a.owner}, ${a.id}, ${a.host}, ${a.pid}, ${a.concurrency}, ${a.version}, ${a.queues}::text[])
    ON CONFLICT (owner, id) DO UPDATE SET
      host = excluded.host, pid = excluded.pid, concurrency = excluded.concurrency, version = excluded.version,
      queues = excluded.queues, last_seen_at = now(),
      -- Another process under the same id (a restart): its start is now.
      started_at = CASE WHEN baton.workers.pid IS DISTINCT FROM excluded.pid OR baton.workers.host IS DISTINCT FROM excluded.host
                        THEN now() ELSE baton.workers.started_at END`.execute(db);
}

/** A worker says goodbye (it is stopping): answers whether it was announced. */
export async function forgetWorker(db: Db, owner: string, id: string): Promise<boolean> {
  const result = await sql`DELETE FROM baton.workers WHERE owner = ${owner} AND id = ${id}`.execute(db);
  return Number(result.numAffectedRows ?? 0) > 0;
}

/**
 * A claim named this worker on `queue`: it is alive. Only a worker that announced that queue is
 * refreshed, so a claim can refresh only a worker of queues its key may use.
 */
export async function workerSeen(db: Db, id: string, queue: string): Promise<void> {
  await sql`
    UPDATE baton.workers SET last_seen_at = now()
    WHERE id = ${id} AND ${queue} = ANY(queues) AND last_seen_at < now() - interval '1 second'`.execute(db);
}

/**
 * The workers seen within `silenceMs`, each with the jobs it holds in its queues (the claimed-jobs
 * index, by queue), busiest first. With `patterns` (a queue-limited key), only workers all of whose
 * queues the key may use: another tenant's hosts and pids stay hidden. With `queue`, only workers
 * that announced it among their queues.
 */
export async function listWorkers(
  db: Db,
  opts: { silenceMs: number; patterns?: string[]; queue?: string; limit: number },
): Promise<WorkerRow[]> {
  const scope =
    opts.patterns === undefined
      ? sql`TRUE`
      : sql`NOT EXISTS (SELECT 1 FROM unnest(w.queues) q(name) WHERE NOT q.name ~ ANY(${opts.patterns}::text[]))`;
  const { rows } = await sql<WorkerRow>`
    SELECT w.owner, w.id, w.host, w.pid, w.concurrency, w.version, w.queues, w.started_at, w.last_seen_at,
           held.jobs, held.job_ids
    FROM baton.workers w
    CROSS JOIN LATERAL (
      SELECT count(*)::int AS jobs,
             coalesce((array_agg(j.id::text ORDER BY j.claimed_at, j.id))[1:${HELD_LISTED}], '{}') AS job_ids
      FROM baton.jobs j
      WHERE j.state = 'claimed' AND j.queue = ANY(w.queues) AND j.worker_id = w.id
    ) held
    WHERE w.last_seen_at > now() - ${opts.silenceMs}::bigint * interval '1 millisecond' AND ${scope}
      ${opts.queue === undefined ? sql`` : sql`AND ${opts.queue}::text = ANY(w.queues)`}
    ORDER BY held.jobs DESC, w.id, w.owner
    LIMIT ${opts.limit}`.execute(db);
  return rows;
}

/** Forget workers silent for a day; how many. */
export async function pruneWorkers(db: Db): Promise<number> {
  const result = await sql`DELETE FROM baton.workers WHERE last_seen_at < now() - interval '1 day'`.execute(
    db,
  );
  return Number(result.numAffectedRows ?? 0);
}
