import type { ClaimedRow } from '../../jobs/claim/types.js';
import { parseDatabaseJson } from '../../json/exact.js';
import type { Caller } from '../access.js';
import { type Action, queueOf } from '../call.js';
import { invalidValue } from '../errors.js';
import { type Input, optionalInt, optionalString, stringList } from '../input.js';
import { md5Hex, md5OfAttributes } from '../md5.js';
import { selectAttributes } from '../message.js';
import { leaseOf } from '../queue-attributes.js';
import { queueArn, type SqsPlace } from '../queue-url.js';
import type { ReceiptHandles } from '../receipt-handle.js';
import type { MessageMeta } from './send.js';

/**
 * ReceiveMessage: a claim of up to MaxNumberOfMessages (1-10) jobs under a lease of
 * VisibilityTimeout (else the queue's), long-polling up to WaitTimeSeconds (else the queue's
 * ReceiveMessageWaitTimeSeconds) with Baton's wake-up. Each job comes back as a message: its id is
 * the MessageId, its lease the ReceiptHandle, its attempts ApproximateReceiveCount.
 *
 * On a FIFO queue the claim is the flow claim of a queue with group_concurrency_limit 1, taking
 * whole groups (Claimant.wholeGroups): a group with no message in flight gives its next messages
 * together, in order, up to MaxNumberOfMessages, before the next group is served; while any of them
 * is in flight, none of the group's later messages is received. A FIFO receive with a
 * ReceiveRequestAttemptId sent again within five minutes answers the same messages and receipt
 * handles, their visibility timeout reset (service claimOnce, jobs/receive-attempts.ts); once one of
 * them was deleted, made visible or timed out, the attempt id is refused (docs/sqs.md, "FIFO queues").
 */

/** System attributes a receive can return; others it may name (queue attributes, ...) are ignored. */
const SYSTEM_ATTRIBUTES = [
  'SenderId',
  'SentTimestamp',
  'ApproximateReceiveCount',
  'ApproximateFirstReceiveTimestamp',
  'AWSTraceHeader',
  'MessageGroupId',
  'SequenceNumber',
  'MessageDeduplicationId',
  'DeadLetterQueueSourceArn',
];

export const receiveMessage: Action = async (call, input) => {
  const { deps } = call;
  const name = queueOf(call, input);
  const maxJobs = optionalInt(input, 'MaxNumberOfMessages', 1, 10) ?? 1;
  const visibility = optionalInt(input, 'VisibilityTimeout', 0, 43_200);
  const wait = optionalInt(input, 'WaitTimeSeconds', 0, 20);
  const systemNames = [
    ...stringList(input, 'AttributeNames'),
    ...stringList(input, 'MessageSystemAttributeNames'),
  ];
  const attributeNames = stringList(input, 'MessageAttributeNames');
  const queue = await deps.queues.get(name);
  // Before the claim: a key that cannot be read fails the receive with nothing claimed.
  const handles = await deps.receiptHandles();

  // A receiver that goes away gets nothing: the service gives back what it claimed meanwhile.
  const claim = {
    queue: name,
    maxJobs,
    leaseMs: visibility === undefined ? undefined : leaseOf(visibility),
    workerId: call.caller.senderId,
    // FIFO: a group with nothing in flight gives its next messages together, in order.
    wholeGroups: queue.fifo,
    waitMs: (wait ?? queue.waitSeconds) * 1000,
    signal: call.signal,
    log: call.log,
    trace: call.trace,
  };
  // SQS reads ReceiveRequestAttemptId on FIFO queues only (a standard queue's receive ignores it).
  const attemptId = receiveAttemptId(input);
  const rows =
    attemptId !== undefined && queue.fifo
      ? await deps.service.jobs.claimOnce(claim, {
          queue: name,
          caller: callerScope(call.caller),
          attemptId,
        })
      : await deps.service.jobs.claim(claim);
  if (rows === 'stale') {
    throw invalidValue(
      'ReceiveRequestAttemptId',
      attemptId,
      'The receiveRequestAttemptId is not valid anymore since the receive call is not retryable.',
    );
  }
  if (rows.length === 0) return {};
  const wanted = systemNames.some((n) => n === 'All') ? SYSTEM_ATTRIBUTES : systemNames;
  return {
    Messages: rows.map((row) => toMessage(row, handles, queue.fifo, wanted, attributeNames, deps.place)),
  };
};

/** ReceiveRequestAttemptId: 1-128 letters, digits and punctuation, as SQS allows. */
function receiveAttemptId(input: Input): string | undefined {
  const id = optionalString(input, 'ReceiveRequestAttemptId');
  if (id === undefined) return undefined;
  if (!/^[\x21-\x7e]{1,128}$/.test(id)) {
    throw invalidValue(
      'ReceiveRequestAttemptId',
      id,
      'ReceiveRequestAttemptId can only include alphanumeric and punctuation characters. 1 to 128 in length.',
    );
  }
  return id;
}

/**
 * Whose receive an attempt id belongs to: the API key the request acts as (a tenant, whatever key pair
 * signed it), else the access key id it signed with (a server without keys).
 */
const callerScope = (caller: Caller) => (caller.key ? `key:${caller.key.name}` : `sender:${caller.senderId}`);

function toMessage(
  row: ClaimedRow,
  handles: ReceiptHandles,
  fifo: boolean,
  systemNames: string[],
  attributeNames: string[],
  place: SqsPlace,
) {
  // A job enqueued through the native API may hold any JSON; its body is then the JSON text.
  const payload = parseDatabaseJson(row.payload_json);
  const body = typeof payload === 'string' ? payload : JSON.stringify(payload);
  const meta = ((row.meta as { sqs?: MessageMeta } | null)?.sqs ?? {}) as MessageMeta;
  const system: Record<string, string | undefined> = {
    SenderId: meta.sender_id,
    SentTimestamp: String(row.created_at.getTime()),
    ApproximateReceiveCount: String(row.attempts),
    // Baton keeps the latest claim's time only: exact on the first receive, left out after it.
    ApproximateFirstReceiveTimestamp: row.attempts === 1 ? String(row.claimed_at.getTime()) : undefined,
    AWSTraceHeader: meta.system_attributes?.AWSTraceHeader?.StringValue,
    MessageGroupId: meta.group_id,
    // FIFO: the job id orders the messages of a group, as SQS's sequence numbers do.
    SequenceNumber: fifo ? row.id : undefined,
    MessageDeduplicationId: fifo ? meta.deduplication_id : undefined,
    // A message the leader forwarded to this dead-letter queue names the queue it died in.
    DeadLetterQueueSourceArn:
      meta.dead_letter_source === undefined ? undefined : queueArn(place, meta.dead_letter_source),
  };
  const attributes: Record<string, string> = {};
  for (const name of systemNames) {
    const value = SYSTEM_ATTRIBUTES.includes(name) ? system[name] : undefined;
    if (value !== undefined) attributes[name] = value;
  }
  const messageAttributes = selectAttributes(meta.attributes ?? {}, attributeNames);
  const md5Attributes = md5OfAttributes(messageAttributes);
  return {
    MessageId: row.id,
    ReceiptHandle: handles.encode({ queue: row.queue, id: row.id, leaseToken: row.lease_token }),
    MD5OfBody: md5Hex(body),
    Body: body,
    ...(Object.keys(attributes).length > 0 ? { Attributes: attributes } : {}),
    ...(md5Attributes ? { MD5OfMessageAttributes: md5Attributes, MessageAttributes: messageAttributes } : {}),
  };
}
