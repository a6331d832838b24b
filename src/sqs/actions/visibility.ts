import type { LeaseOutcome } from '../../jobs/lease-outcome.js';
import { batchEntries, distinctRounds, failedEntry } from '../batch.js';
import { type Action, queueOf, type SqsCall } from '../call.js';
import { SqsError } from '../errors.js';
import { type Input, requiredInt, requiredString } from '../input.js';
import type { SqsQueue } from '../queue-attributes.js';
import type { Lease } from '../receipt-handle.js';
import { leasesOfHandles } from './delete.js';

/**
 * ChangeMessageVisibility(Batch). A timeout above 0 renews the lease to end that many seconds from
 * now (the same HOT-eligible renewal as POST /v1/jobs/{id}/renew). A timeout of 0 makes the message
 * visible again at once: a nack with no delay, so the receive is counted as a failed attempt, exactly
 * as SQS counts it in ApproximateReceiveCount (and on the last allowed attempt the message goes dead,
 * then to the dead-letter queue). On a FIFO queue the message keeps its place (nack's keepPlace): it
 * is received again before its group's later messages. A handle whose lease is no longer current is
 * refused the way SQS refuses it.
 */

const notAvailable = () =>
  new SqsError(
    'InvalidParameterValue',
    'Value for parameter ReceiptHandle is invalid. Reason: Message does not exist or is not available for visibility timeout change.',
  );

interface Change {
  entry: string;
  lease: Lease;
  seconds: number;
}

/** Make one message visible now: a nack without delay (on a FIFO queue, in its place). */
async function release(call: SqsCall, queue: SqsQueue, change: Change): Promise<LeaseOutcome<unknown>> {
  const { outcome } = await call.deps.service.leases.nack(
    {
      ...change.lease,
      error: { message: 'visibility timeout set to 0 (ChangeMessageVisibility)' },
      retryInMs: 0,
      // A FIFO message given back comes before its group's later ones, as after a timeout.
      keepPlace: queue.fifo,
    },
    undefined,
    call.trace,
  );
  return outcome;
}

/** Change each visibility; per change, whether it was applied. */
async function apply(call: SqsCall, queue: SqsQueue, changes: Change[]): Promise<Map<Change, boolean>> {
  const applied = new Map<Change, boolean>();
  for (const change of changes.filter((c) => c.seconds === 0)) {
    applied.set(change, (await release(call, queue, change)).outcome === 'done');
  }
  const renewals = changes
    .filter((c) => c.seconds > 0)
    .map((c) => ({ ...c.lease, leaseMs: c.seconds * 1000, change: c }));
  for (const round of distinctRounds(renewals)) {
    const outcomes = await call.deps.service.leases.renew(round);
    outcomes.forEach((outcome, i) => {
      applied.set(round[i]!.change, outcome.outcome === 'done');
    });
  }
  return applied;
}

function changeOf(entry: string, input: Input, leaseOf: (handle: string) => Lease): Change {
  const lease = leaseOf(requiredString(input, 'ReceiptHandle'));
  return { entry, lease, seconds: requiredInt(input, 'VisibilityTimeout', 0, 43_200) };
}

export const changeMessageVisibility: Action = async (call, input) => {
  const queue = queueOf(call, input);
  const change = changeOf('', input, await leasesOfHandles(call, queue));
  const found = await call.deps.queues.get(queue);
  if (!(await apply(call, found, [change])).get(change)) throw notAvailable();
  return {};
};

export const changeMessageVisibilityBatch: Action = async (call, input) => {
  const queue = queueOf(call, input);
  const entries = batchEntries(input, 'ChangeMessageVisibilityBatch');
  const found = await call.deps.queues.get(queue);
  const leaseOf = await leasesOfHandles(call, queue);
  const failed: ReturnType<typeof failedEntry>[] = [];
  const changes: Change[] = [];
  for (const entry of entries) {
    try {
      changes.push(changeOf(entry.id, entry.input, leaseOf));
    } catch (err) {
      if (!(err instanceof SqsError)) throw err;
      failed.push(failedEntry(entry.id, err));
    }
  }
  const applied = await apply(call, found, changes);
  const successful: { Id: string }[] = [];
  for (const change of changes) {
    if (applied.get(change)) successful.push({ Id: change.entry });
    else failed.push(failedEntry(change.entry, notAvailable()));
  }
  return { Successful: successful, Failed: failed };
};
