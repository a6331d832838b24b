import { createHash } from 'node:crypto';
import type { EnqueueItem } from '../../jobs/enqueue/enqueue.js';
import { DOT_SEGMENT_MESSAGE, isDotSegment, isGroupName } from '../../jobs/limits.js';
import { batchEntries, failedEntry } from '../batch.js';
import { type Action, queueOf, type SqsCall } from '../call.js';
import { invalidValue, SqsError } from '../errors.js';
import { type Input, optionalInt, optionalString, requiredString } from '../input.js';
import { md5Hex, md5OfAttributes, type StoredAttribute } from '../md5.js';
import { checkBody, checkMessageAttributes, checkSystemAttributes, MAX_MESSAGE_BYTES } from '../message.js';
import type { SqsQueue } from '../queue-attributes.js';

/**
 * SendMessage and SendMessageBatch: each message becomes a job whose payload is the body (a JSON
 * string) and whose meta keeps what SQS returns on receive: the message attributes, the system
 * attributes (AWSTraceHeader), the MessageGroupId and the sender. DelaySeconds (or the queue's) is
 * the job's delay. The queue must exist: SQS never creates a queue on send.
 *
 * On a FIFO queue a message needs a MessageGroupId (the job's group) and a MessageDeduplicationId
 * (or the queue's ContentBasedDeduplication: the SHA-256 of the body), which becomes the job's
 * idempotency key, kept five minutes (the plugin's FIFO EnqueueGroups): a duplicate within that
 * window creates nothing and is answered the original MessageId and SequenceNumber, as SQS does.
 * With DeduplicationScope=messageGroup the key is the group and the id, so the same id in another
 * group is another message. Only the queue's DelaySeconds applies. SequenceNumber is the job id:
 * ids grow with every enqueue (a batch's in request order), so they order a group's messages.
 */

/** What a job's meta.sqs holds for a message sent through this endpoint. */
export interface MessageMeta {
  sender_id?: string;
  attributes?: Record<string, StoredAttribute>;
  system_attributes?: Record<string, StoredAttribute>;
  group_id?: string;
  /** FIFO: the deduplication id, given or content-based. */
  deduplication_id?: string;
  /** Set by the leader on a message it forwarded to a dead-letter queue: the queue it died in (jobs/redrive.ts). */
  dead_letter_source?: string;
}

interface Prepared {
  item: EnqueueItem;
  bytes: number;
  digests: {
    MD5OfMessageBody: string;
    MD5OfMessageAttributes?: string;
    MD5OfMessageSystemAttributes?: string;
  };
}

/** SQS's rule for a MessageGroupId and a MessageDeduplicationId: Baton's group names are the same. */
const isFifoId = isGroupName;
const fifoIdRule = (parameter: string) =>
  `${parameter} can only include alphanumeric and punctuation characters. 1 to 128 in length.`;

const NEEDS_DEDUPLICATION_ID =
  'The queue should either have ContentBasedDeduplication enabled or MessageDeduplicationId provided explicitly';

const given = (value: unknown) => value !== undefined && value !== null;

/**
 * A FIFO batch is refused whole, as SQS refuses it, when an entry lacks its deduplication id (and the
 * queue has no content-based deduplication) or its group.
 */
function checkFifoBatch(queue: SqsQueue, entries: { input: Input }[]): void {
  for (const { input } of entries) {
    if (!given(input.MessageDeduplicationId) && !queue.contentBasedDeduplication) {
      throw new SqsError('InvalidParameterValue', NEEDS_DEDUPLICATION_ID);
    }
    if (!given(input.MessageGroupId) || input.MessageGroupId === '') {
      throw new SqsError('InvalidParameterValue', 'The request must contain the parameter MessageGroupId.');
    }
  }
}

/** A FIFO message's deduplication id (given, or the SHA-256 of its body) and its idempotency key. */
function deduplicationOf(queue: SqsQueue, entry: Input, body: string, groupId: string) {
  let id = optionalString(entry, 'MessageDeduplicationId');
  if (id !== undefined && !isFifoId(id)) {
    throw invalidValue('MessageDeduplicationId', id, fifoIdRule('MessageDeduplicationId'));
  }
  if (id === undefined) {
    if (!queue.contentBasedDeduplication) throw new SqsError('InvalidParameterValue', NEEDS_DEDUPLICATION_ID);
    id = createHash('sha256').update(body, 'utf8').digest('hex');
  }
  // Group and id cannot run together: neither holds a space.
  return { id, key: queue.deduplicationScope === 'messageGroup' ? `${groupId} ${id}` : id };
}

function prepare(call: SqsCall, queue: SqsQueue, entry: Input): Prepared {
  const body = requiredString(entry, 'MessageBody');
  checkBody(body);
  const delay = optionalInt(entry, 'DelaySeconds', 0, 900);
  // A FIFO queue takes no per-message delay (0 is allowed): its own DelaySeconds applies.
  if (queue.fifo && delay !== undefined && delay !== 0) {
    throw invalidValue(
      'DelaySeconds',
      delay,
      'The request include parameter that is not valid for this queue type.',
    );
  }
  const delaySeconds = (queue.fifo ? undefined : delay) ?? queue.delaySeconds;
  const { attributes, bytes: attributeBytes } = checkMessageAttributes(entry.MessageAttributes);
  const system = checkSystemAttributes(entry.MessageSystemAttributes);
  if (!queue.fifo && given(entry.MessageDeduplicationId)) {
    throw invalidValue(
      'MessageDeduplicationId',
      entry.MessageDeduplicationId,
      'The request includes a parameter that is not valid for this queue type (deduplication needs a FIFO queue).',
    );
  }
  const groupId = queue.fifo
    ? requiredString(entry, 'MessageGroupId')
    : optionalString(entry, 'MessageGroupId');
  if (groupId !== undefined && !isFifoId(groupId)) {
    throw invalidValue('MessageGroupId', groupId, fifoIdRule('MessageGroupId'));
  }
  // A group is a Baton group too, reached at /v1/queues/{queue}/groups/{group}.
  if (groupId !== undefined && isDotSegment(groupId)) {
    throw invalidValue('MessageGroupId', groupId, `MessageGroupId ${DOT_SEGMENT_MESSAGE}.`);
  }
  const deduplication = queue.fifo ? deduplicationOf(queue, entry, body, groupId!) : undefined;
  const bytes = Buffer.byteLength(body) + attributeBytes;
  const limit = Math.min(queue.maxMessageBytes, MAX_MESSAGE_BYTES);
  if (bytes > limit) {
    throw new SqsError(
      'InvalidParameterValue',
      `One or more parameters are invalid. Reason: Message must be shorter than ${limit} bytes.`,
    );
  }
  const sqs: MessageMeta = { sender_id: call.caller.senderId };
  if (Object.keys(attributes).length > 0) sqs.attributes = attributes;
  if (Object.keys(system).length > 0) sqs.system_attributes = system;
  if (groupId !== undefined) sqs.group_id = groupId;
  if (deduplication) sqs.deduplication_id = deduplication.id;
  const md5Attributes = md5OfAttributes(attributes);
  const md5System = md5OfAttributes(system);
  return {
    // The message group is the job's group: its queue serves groups in turn (SQS's fair queues).
    item: {
      payloadJson: JSON.stringify(body),
      priority: 0,
      delayMs: delaySeconds * 1000,
      meta: { sqs },
      ...(groupId === undefined ? {} : { group: groupId }),
      ...(deduplication ? { idempotencyKey: deduplication.key } : {}),
    },
    bytes,
    digests: {
      MD5OfMessageBody: md5Hex(body),
      ...(md5Attributes ? { MD5OfMessageAttributes: md5Attributes } : {}),
      ...(md5System ? { MD5OfMessageSystemAttributes: md5System } : {}),
    },
  };
}

/** SQS never creates a queue on send; a FIFO queue's deduplication ids are idempotency keys. */
const enqueue = (call: SqsCall, queue: SqsQueue, items: EnqueueItem[]) =>
  call.deps.service.jobs.enqueue(queue.name, items, queue.fifo ? 'sqs-fifo' : 'sqs', { trace: call.trace });

/** What a send answers of its job: its MessageId and, on a FIFO queue, its SequenceNumber. */
const ids = (queue: SqsQueue, id: string) => ({
  MessageId: id,
  ...(queue.fifo ? { SequenceNumber: id } : {}),
});

export const sendMessage: Action = async (call, input) => {
  const name = queueOf(call, input);
  const queue = await call.deps.queues.get(name);
  const prepared = prepare(call, queue, input);
  const [result] = await enqueue(call, queue, [prepared.item]);
  return { ...prepared.digests, ...ids(queue, result!.job.id) };
};

export const sendMessageBatch: Action = async (call, input) => {
  const name = queueOf(call, input);
  const entries = batchEntries(input, 'SendMessageBatch');
  const queue = await call.deps.queues.get(name);
  if (queue.fifo) checkFifoBatch(queue, entries);
  const failed: ReturnType<typeof failedEntry>[] = [];
  const good: { id: string; prepared: Prepared }[] = [];
  for (const entry of entries) {
    try {
      good.push({ id: entry.id, prepared: prepare(call, queue, entry.input) });
    } catch (err) {
      if (!(err instanceof SqsError)) throw err;
      failed.push(failedEntry(entry.id, err));
    }
  }
  const total = good.reduce((n, g) => n + g.prepared.bytes, 0);
  if (total > MAX_MESSAGE_BYTES) {
    throw new SqsError(
      'BatchRequestTooLong',
      `Batch requested message too long: the messages total ${total} bytes; the most is ${MAX_MESSAGE_BYTES}.`,
    );
  }
  const results =
    good.length > 0
      ? await enqueue(
          call,
          queue,
          good.map((g) => g.prepared.item),
        )
      : [];
  return {
    Successful: good.map((g, i) => ({ Id: g.id, ...ids(queue, results[i]!.job.id), ...g.prepared.digests })),
    Failed: failed,
  };
};
