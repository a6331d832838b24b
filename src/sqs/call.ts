import type { Config } from '../config.js';
import type { TraceContext } from '../jobs/trace-context.js';
import type { Log } from '../logger.js';
import type { Metrics } from '../metrics/metrics.js';
import type { Service } from '../service/service.js';
import { type Caller, checkQueue } from './access.js';
import { invalidValue, missingParameter } from './errors.js';
import type { Input } from './input.js';
import type { QueueCache } from './queue-cache.js';
import { queueOfUrl, type SqsPlace } from './queue-url.js';
import type { ReceiptHandles } from './receipt-handle.js';

/** What every action works with: built once by the plugin (src/plugins/sqs.ts). */
export interface SqsDeps {
  config: Config;
  place: SqsPlace;
  queues: QueueCache;
  /**
   * The replica's use cases (src/service/), the native API's own: SendMessage enqueues, ReceiveMessage
   * claims, DeleteMessage acks, ChangeMessageVisibility renews or nacks, queue actions configure.
   */
  service: Service;
  /** The receipt handles' codec, its key read from the database once (see receipt-handle.ts). */
  receiptHandles: () => Promise<ReceiptHandles>;
  metrics: Metrics;
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
  /** The request's trace context (its traceparent header): the parent of Baton's span for it. */
  trace: TraceContext | undefined;
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
