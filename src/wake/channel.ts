import { randomUUID } from 'node:crypto';

/** The LISTEN/NOTIFY channel that carries "jobs are ready in these queues" between replicas. */
export const JOBS_CHANNEL = 'baton_jobs';

/** PostgreSQL's NOTIFY payload limit is 8000 bytes; stay clear of it. */
export const MAX_PAYLOAD_BYTES = 7000;

/**
 * Payload: the sending replica (so it can ignore its own echo), a count of ready jobs per queue, and
 * the queues whose claims a flow-control limit held back there (`w`), which every replica then
 * watches for freed slots (Notifier.watchSlots). For awaited jobs (Notifier.awaiting): the jobs a
 * request on the sending replica awaits, each with how long at most (`a`, id → ms), and the jobs
 * that finished on the sending replica which another replica said it awaits (`f`). From the database
 * itself (sender `postgres`): `p`, a parent with children finished or was redriven, so the replicas'
 * releasers run (migration 0019). From the leader while readers pin the ring: `fl`, each queue's
 * claim floor (jobs/claim/floors.ts) as [priority, run_at], lasting `ft` ms.
 */
export interface JobsNotice {
  r: string;
  q: Record<string, number>;
  w?: string[];
  a?: Record<string, number>;
  f?: string[];
  p?: number;
  fl?: Record<string, [number, string]>;
  ft?: number;
}

/** Queues per notice of `fl`: a name is at most 128 characters, a floor about 40 more. */
export const FLOORS_PER_NOTICE = 40;

/** Job ids per notice of `a` or `f`: an id is at most 18 digits, so 200 stay far below the limit. */
export const IDS_PER_NOTICE = 200;

export const newReplicaId = () => randomUUID();
