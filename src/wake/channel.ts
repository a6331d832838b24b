import { randomUUID } from 'node:crypto';

/** The LISTEN/NOTIFY channel that carries "jobs are ready in these queues" between replicas. */
export const JOBS_CHANNEL = 'baton_jobs';

/** PostgreSQL's NOTIFY payload limit is 8000 bytes; stay clear of it. */
export const MAX_PAYLOAD_BYTES = 7000;

/**
 * Payload: the sending replica (so it can ignore its own echo), a count of ready jobs per queue, and
 * the queues whose claims a flow-control limit held back there (`w`), which every replica then
 * watches for freed slots (Notifier.watchSlots).
 */
export interface JobsNotice {
  r: string;
  q: Record<string, number>;
  w?: string[];
}

export const newReplicaId = () => randomUUID();
