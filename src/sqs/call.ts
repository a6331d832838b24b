import type { Config } from '../config.js';
import type { Db } from '../db/database.js';
import type { HeldBack } from '../jobs/claim/types.js';
import type { AckGroups, ClaimGroups, EnqueueGroups } from '../jobs/statement-groups.js';
import type { Log } from '../logger.js';
import type { Metrics } from '../metrics/metrics.js';
import type { WaitList } from '../wake/wait-list.js';
import { type Caller, checkQueue } from './access.js';
import { invalidValue, missingParameter } from './errors.js';
import type { Input } from './input.js';
import type { QueueCache } from './queue-cache.js';
import { queueOfUrl, type SqsPlace } from './queue-url.js';
import type { ReceiptHandles } from './receipt-handle.js';

/** What every action works with: built once by the plugin (src/plugins/sqs.ts). */
export interface SqsDeps {
  db: Db;
  config: Config;
  place: SqsPlace;
  queues: QueueCache;
  enqueues: EnqueueGroups;
  /** Enqueues into FIFO queues: their deduplication ids are idempotency keys kept five minutes. */
  fifoEnqueues: EnqueueGroups;
  claims: ClaimGroups;
  acks: AckGroups;
  /** The receipt handles' codec, its key read from the database once (see receipt-handle.ts). */
  receiptHandles: () => Promise<ReceiptHandles>;
  waitList: WaitList;
  /** After a write made jobs ready: wake claimers here and on other replicas. */
  jobsReady: (queue: string, count: number) => void;
  /** After jobs left `claimed` (delete, a release to dead): wake claimers a limit held back. */
  slotsFreed: (queue: string, count: number) => void;
  /** A claim was held back by a flow-control limit. */
  heldBack: (queue: string, held: HeldBack) => void;
  metrics: Metrics;
  shuttingDown: () => boolean;
}

/** One request: who calls, how its queue URLs are written, and whether its client is still there. */
export interface SqsCall {
  deps: SqsDeps;
  caller: Caller;
  /** Scheme and host (or BATON_SQS_QUEUE_URL) that queue URLs start with. */
  baseUrl: string;
  /** The queue URL the request was posted to, for clients that post to it instead of naming it. */
  pathQueueUrl: string | undefined;
  /** Aborted when the client goes away (a long-poll then gives its messages back). */
  signal: AbortSignal;
  log: Log;
}

export type Action = (call: SqsCall, input: Input) => Promise<Record<string, unknown>>;

/** The queue a request's QueueUrl names, once the caller's key may use it. */
export function queueOf(call: SqsCall, input: Input): string {
  const url = input.QueueUrl ?? call.pathQueueUrl;
  if (url === undefined || url === null || url === '') throw missingParameter('QueueUrl');
  if (typeof url !== 'string') throw invalidValue('QueueUrl', url, 'must be a string.');
  const queue = queueOfUrl(url, call.deps.place);
  checkQueue(call.caller, queue);
  return queue;
}
