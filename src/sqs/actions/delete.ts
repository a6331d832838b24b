import { batchEntries, distinctRounds, failedEntry } from '../batch.js';
import { type Action, queueOf, type SqsCall } from '../call.js';
import { invalidReceiptHandle, SqsError } from '../errors.js';
import { requiredString } from '../input.js';
import type { Lease } from '../receipt-handle.js';

/**
 * DeleteMessage(Batch): an ack of the lease the receipt handle carries. As SQS documents, deleting
 * with a stale handle (the message's visibility timed out and it was received again, or it is gone)
 * is not an error, and it never deletes the newer delivery: the ack matches only the lease it names.
 * A handle this server did not issue, or one of another queue, is ReceiptHandleIsInvalid.
 */

/**
 * The lease a request's handle carries, on the queue the request names (which the caller's key was
 * allowed): as an item of the ack, renew or nack, scoped to that queue in their SQL.
 */
export async function leasesOfHandles(call: SqsCall, queue: string): Promise<(handle: string) => Lease> {
  const handles = await call.deps.receiptHandles();
  return (handle) => {
    const lease = handles.decode(handle);
    if (!lease || lease.queue !== queue) throw invalidReceiptHandle();
    return lease;
  };
}

export const deleteMessage: Action = async (call, input) => {
  const queue = queueOf(call, input);
  const leaseOf = await leasesOfHandles(call, queue);
  const lease = leaseOf(requiredString(input, 'ReceiptHandle'));
  await call.deps.queues.get(queue);
  // A stale handle acks nothing, and as SQS documents that is not an error.
  await call.deps.service.leases.ack(lease, undefined, call.trace);
  return {};
};

export const deleteMessageBatch: Action = async (call, input) => {
  const queue = queueOf(call, input);
  const entries = batchEntries(input, 'DeleteMessageBatch');
  await call.deps.queues.get(queue);
  const leaseOf = await leasesOfHandles(call, queue);
  const failed: ReturnType<typeof failedEntry>[] = [];
  const items: (Lease & { entry: string })[] = [];
  for (const entry of entries) {
    try {
      items.push({ entry: entry.id, ...leaseOf(requiredString(entry.input, 'ReceiptHandle')) });
    } catch (err) {
      if (!(err instanceof SqsError)) throw err;
      failed.push(failedEntry(entry.id, err));
    }
  }
  for (const round of distinctRounds(items))
    await call.deps.service.leases.ackBatch(round, { trace: call.trace });
  return { Successful: items.map((i) => ({ Id: i.entry })), Failed: failed };
};
