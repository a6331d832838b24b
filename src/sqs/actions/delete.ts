import { ackJob, ackJobs } from '../../jobs/ack.js';
import type { LeaseOutcome } from '../../jobs/lease-outcome.js';
import { batchEntries, distinctRounds, failedEntry } from '../batch.js';
import { type Action, queueOf, type SqsCall } from '../call.js';
import { invalidReceiptHandle, SqsError } from '../errors.js';
import { requiredString } from '../input.js';
import { decodeReceiptHandle, type Lease } from '../receipt-handle.js';

/**
 * DeleteMessage(Batch): an ack of the lease the receipt handle carries. As SQS documents, deleting
 * with a stale handle (the message's visibility timed out and it was received again, or it is gone)
 * is not an error, and it never deletes the newer delivery: the ack matches only the lease it names.
 * A handle this server did not issue, or one of another queue, is ReceiptHandleIsInvalid.
 */

/** The lease a request's handle carries, on the queue the request names. */
export function leaseOfHandle(handle: string, queue: string): Lease {
  const lease = decodeReceiptHandle(handle);
  if (!lease || lease.queue !== queue) throw invalidReceiptHandle();
  return lease;
}

/** Metrics of an ack's outcome: acked jobs, or a lost lease (a stale handle). */
function count(
  call: SqsCall,
  queue: string,
  outcome: LeaseOutcome<{ queue: string; claimed_at: Date | null; finished_at: Date | null }>,
) {
  if (outcome.outcome === 'done') {
    call.deps.metrics.acked([outcome.value]);
    call.deps.slotsFreed(queue, 1);
  } else if (outcome.outcome === 'lease_lost') call.deps.metrics.leaseLost(queue, 'ack');
}

export const deleteMessage: Action = async (call, input) => {
  const queue = queueOf(call, input);
  const lease = leaseOfHandle(requiredString(input, 'ReceiptHandle'), queue);
  await call.deps.queues.get(queue);
  const outcome = await ackJob(call.deps.db, call.deps.acks, { id: lease.id, leaseToken: lease.leaseToken });
  count(call, queue, outcome);
  return {};
};

export const deleteMessageBatch: Action = async (call, input) => {
  const queue = queueOf(call, input);
  const entries = batchEntries(input, 'DeleteMessageBatch');
  await call.deps.queues.get(queue);
  const failed: ReturnType<typeof failedEntry>[] = [];
  const items: { entry: string; id: string; leaseToken: string }[] = [];
  for (const entry of entries) {
    try {
      const lease = leaseOfHandle(requiredString(entry.input, 'ReceiptHandle'), queue);
      items.push({ entry: entry.id, id: lease.id, leaseToken: lease.leaseToken });
    } catch (err) {
      if (!(err instanceof SqsError)) throw err;
      failed.push(failedEntry(entry.id, err));
    }
  }
  for (const round of distinctRounds(items)) {
    const outcomes = await ackJobs(call.deps.db, call.deps.acks, round);
    for (const outcome of outcomes) count(call, queue, outcome);
  }
  return { Successful: items.map((i) => ({ Id: i.entry })), Failed: failed };
};
