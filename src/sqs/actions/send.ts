import type { EnqueueItem } from '../../jobs/enqueue.js';
import { isGroupName } from '../../jobs/limits.js';
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
 */

/** What a job's meta.sqs holds for a message sent through this endpoint. */
export interface MessageMeta {
  sender_id?: string;
  attributes?: Record<string, StoredAttribute>;
  system_attributes?: Record<string, StoredAttribute>;
  group_id?: string;
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

function prepare(call: SqsCall, queue: SqsQueue, entry: Input): Prepared {
  const body = requiredString(entry, 'MessageBody');
  checkBody(body);
  const delaySeconds = optionalInt(entry, 'DelaySeconds', 0, 900) ?? queue.delaySeconds;
  const { attributes, bytes: attributeBytes } = checkMessageAttributes(entry.MessageAttributes);
  const system = checkSystemAttributes(entry.MessageSystemAttributes);
  if (entry.MessageDeduplicationId !== undefined && entry.MessageDeduplicationId !== null) {
    throw invalidValue(
      'MessageDeduplicationId',
      entry.MessageDeduplicationId,
      'The request includes a parameter that is not valid for this queue type (deduplication needs a FIFO queue).',
    );
  }
  const groupId = optionalString(entry, 'MessageGroupId');
  if (groupId !== undefined && !isGroupName(groupId)) {
    throw invalidValue('MessageGroupId', groupId, 'Must be 1-128 printable ASCII characters.');
  }
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
    },
    bytes,
    digests: {
      MD5OfMessageBody: md5Hex(body),
      ...(md5Attributes ? { MD5OfMessageAttributes: md5Attributes } : {}),
      ...(md5System ? { MD5OfMessageSystemAttributes: md5System } : {}),
    },
  };
}

async function enqueue(call: SqsCall, queue: string, items: EnqueueItem[]) {
  const results = await call.deps.enqueues.enqueue(queue, items);
  call.deps.metrics.enqueued(queue, results.length);
  const ready = results.filter((r) => r.job.state === 'ready').length;
  if (ready > 0) call.deps.jobsReady(queue, ready);
  return results;
}

export const sendMessage: Action = async (call, input) => {
  const name = queueOf(call, input);
  const prepared = prepare(call, await call.deps.queues.get(name), input);
  const [result] = await enqueue(call, name, [prepared.item]);
  return { ...prepared.digests, MessageId: result!.job.id };
};

export const sendMessageBatch: Action = async (call, input) => {
  const name = queueOf(call, input);
  const entries = batchEntries(input, 'SendMessageBatch');
  const queue = await call.deps.queues.get(name);
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
          name,
          good.map((g) => g.prepared.item),
        )
      : [];
  return {
    Successful: good.map((g, i) => ({ Id: g.id, MessageId: results[i]!.job.id, ...g.prepared.digests })),
    Failed: failed,
  };
};
