import { MAX_ATTEMPTS_LIMIT } from '../jobs/limits.js';
import { NestingError, parseJsonDocument } from '../json/nesting.js';
import { preview } from '../json/preview.js';
import { effectiveSettings, isFifoQueue, type QueueDefaults } from '../queues/queue-settings.js';
import type { QueueRow, QueueStatsRow } from '../queues/queue-store.js';
import { invalidValue, SqsError } from './errors.js';
import { MAX_MESSAGE_BYTES } from './message.js';
import { queueArn, queueOfArn, type SqsPlace } from './queue-url.js';

/**
 * A Baton queue seen as an SQS queue, and its attributes.
 *
 * Mapped onto Baton's own settings: VisibilityTimeout is the queue's lease_ms; RedrivePolicy's
 * maxReceiveCount is its max_attempts (1000, Baton's most, when there is no RedrivePolicy) and its
 * deadLetterTargetArn the queue that dead jobs are forwarded to (meta.dead_letter_queue). The
 * attributes only SQS has live in the queue's meta.sqs.attributes: DelaySeconds and
 * ReceiveMessageWaitTimeSeconds and MaximumMessageSize are applied; MessageRetentionPeriod, Policy,
 * RedriveAllowPolicy and the KMS/SSE settings are kept and returned but change nothing (see
 * docs/sqs.md for why).
 *
 * A FIFO queue (FifoQueue=true, a name ending in .fifo) is a Baton queue with
 * group_concurrency_limit 1: one message per group in flight, each group in order. Its FIFO
 * attributes live in meta.sqs.attributes too: FifoQueue (fixed at creation), ContentBasedDeduplication
 * and DeduplicationScope (applied on send), FifoThroughputLimit (kept and returned).
 */

/** What a queue's `meta` holds; other keys (written by other features) are kept as they are. */
export interface QueueMeta {
  dead_letter_queue?: string;
  sqs?: { attributes?: Record<string, string>; tags?: Record<string, string> };
  [key: string]: unknown;
}

export interface SqsQueue {
  name: string;
  leaseMs: number;
  maxAttempts: number;
  delaySeconds: number;
  waitSeconds: number;
  maxMessageBytes: number;
  deadLetterQueue: string | undefined;
  /** A FIFO queue: sends need a group and a deduplication id; one message per group in flight. */
  fifo: boolean;
  /** FIFO: a send without MessageDeduplicationId is deduplicated by the SHA-256 of its body. */
  contentBasedDeduplication: boolean;
  /** FIFO: deduplication ids are unique per queue, or per message group. */
  deduplicationScope: 'queue' | 'messageGroup';
  meta: QueueMeta;
  row: QueueRow;
  stats: QueueStatsRow | undefined;
}

/** SQS's defaults for the attributes Baton keeps itself. */
const DEFAULTS: Record<string, string> = {
  DelaySeconds: '0',
  MaximumMessageSize: String(MAX_MESSAGE_BYTES),
  MessageRetentionPeriod: '345600',
  ReceiveMessageWaitTimeSeconds: '0',
  SqsManagedSseEnabled: 'false',
};

/** The defaults of a FIFO queue's own attributes (returned by GetQueueAttributes like SQS does). */
const FIFO_DEFAULTS: Record<string, string> = {
  ContentBasedDeduplication: 'false',
  DeduplicationScope: 'queue',
  FifoThroughputLimit: 'perQueue',
};

export const DEFAULT_VISIBILITY_TIMEOUT_S = 30;

/** A queue's SQS attributes as stored, over the defaults of its kind. */
function storedAttributes(meta: QueueMeta, fifo: boolean): Record<string, string> {
  return { ...DEFAULTS, ...(fifo ? FIFO_DEFAULTS : {}), ...meta.sqs?.attributes };
}

export function sqsQueueOf(
  found: { queue: QueueRow; stats?: QueueStatsRow },
  defaults: QueueDefaults,
): SqsQueue {
  const meta = (found.queue.meta ?? {}) as QueueMeta;
  const settings = effectiveSettings(found.queue, defaults);
  const fifo = isFifoQueue(meta);
  const attributes = storedAttributes(meta, fifo);
  return {
    name: found.queue.name,
    leaseMs: settings.leaseMs,
    maxAttempts: settings.maxAttempts,
    delaySeconds: Number(attributes.DelaySeconds),
    waitSeconds: Number(attributes.ReceiveMessageWaitTimeSeconds),
    maxMessageBytes: Number(attributes.MaximumMessageSize),
    deadLetterQueue: meta.dead_letter_queue,
    fifo,
    contentBasedDeduplication: fifo && attributes.ContentBasedDeduplication === 'true',
    deduplicationScope: fifo && attributes.DeduplicationScope === 'messageGroup' ? 'messageGroup' : 'queue',
    meta,
    row: found.queue,
    stats: found.stats,
  };
}

type Check = (value: string, name: string) => string;

const integer =
  (min: number, max: number): Check =>
  (value, name) => {
    if (!/^\d{1,10}$/.test(value) || Number(value) < min || Number(value) > max) {
      throw new SqsError('InvalidAttributeValue', `Invalid value for the parameter ${name}.`);
    }
    return String(Number(value));
  };

const anyText: Check = (value) => value;

const trueOrFalse: Check = (value, name) => {
  if (value !== 'true' && value !== 'false') {
    throw new SqsError('InvalidAttributeValue', `Invalid value for the parameter ${name}.`);
  }
  return value;
};

/** A JSON document kept as given (Policy, RedriveAllowPolicy); empty removes it. */
const jsonText: Check = (value, name) => {
  if (value === '') return value;
  try {
    parseJsonDocument(value);
  } catch (err) {
    const why = err instanceof NestingError ? `the document ${err.message}` : 'not a JSON document';
    throw new SqsError('InvalidAttributeValue', `Invalid value for the parameter ${name}: ${why}.`);
  }
  return value;
};

/** Attributes a client may set, each with its check; RedrivePolicy is handled on its own. */
const SETTABLE: Record<string, Check> = {
  VisibilityTimeout: integer(0, 43_200),
  MaximumMessageSize: integer(1024, MAX_MESSAGE_BYTES),
  MessageRetentionPeriod: integer(60, 1_209_600),
  DelaySeconds: integer(0, 900),
  ReceiveMessageWaitTimeSeconds: integer(0, 20),
  Policy: jsonText,
  RedriveAllowPolicy: jsonText,
  KmsMasterKeyId: anyText,
  KmsDataKeyReusePeriodSeconds: integer(60, 86_400),
  SqsManagedSseEnabled: trueOrFalse,
};

/** A boolean as SQS takes it for FIFO attributes ("True" too), stored as "true" or "false". */
const anyCaseBoolean: Check = (value, name) => trueOrFalse(value.toLowerCase(), name);

const oneOf =
  (...allowed: string[]): Check =>
  (value, name) => {
    if (!allowed.includes(value)) {
      throw new SqsError(
        'InvalidAttributeValue',
        `Invalid value for the parameter ${name}. Valid values: ${allowed.join(', ')}.`,
      );
    }
    return value;
  };

/** Attributes only a FIFO queue has and may change (FifoQueue itself is set once, on create). */
const FIFO_SETTABLE: Record<string, Check> = {
  ContentBasedDeduplication: anyCaseBoolean,
  DeduplicationScope: oneOf('queue', 'messageGroup'),
  FifoThroughputLimit: oneOf('perQueue', 'perMessageGroupId'),
};

const READ_ONLY = [
  'ApproximateNumberOfMessages',
  'ApproximateNumberOfMessagesNotVisible',
  'ApproximateNumberOfMessagesDelayed',
  'CreatedTimestamp',
  'LastModifiedTimestamp',
  'QueueArn',
];

const FIFO_ONLY = ['FifoQueue', ...Object.keys(FIFO_SETTABLE)];

/** A FIFO-only attribute given for a standard queue: SQS's error for each. */
function notForStandardQueues(name: string): SqsError {
  return name === 'FifoQueue' || name === 'ContentBasedDeduplication'
    ? new SqsError('InvalidAttributeName', `Unknown Attribute ${name}.`)
    : new SqsError('InvalidAttributeName', `You can specify the ${name} only when FifoQueue is set to true.`);
}

/** The FifoQueue attribute: chosen at creation (true for a FIFO queue), never changed after. */
function checkFifoQueue(value: string, kind: AttributeTarget): string | undefined {
  const lower = value.toLowerCase();
  if (kind.fifo) {
    if (lower === 'true') return 'true';
    throw new SqsError(
      'InvalidAttributeValue',
      'Invalid value for the parameter FifoQueue. Reason: Modifying queue type is not supported.',
    );
  }
  // A standard queue: SQS refuses the attribute on SetQueueAttributes; CreateQueue takes "false".
  if (!kind.creating) throw notForStandardQueues('FifoQueue');
  if (lower !== 'false') {
    throw new SqsError('InvalidAttributeValue', 'Invalid value for the parameter FifoQueue.');
  }
  return undefined;
}

export interface RedrivePolicy {
  deadLetterQueue: string;
  maxReceiveCount: number;
}

/**
 * Attributes a create or a set asks for, checked: SQS-only ones as they will be stored, the
 * visibility timeout in seconds, and the redrive policy (null: remove it).
 */
export interface RequestedAttributes {
  stored: Record<string, string>;
  visibilityTimeout?: number;
  redrivePolicy?: RedrivePolicy | null;
}

/** Which queue attributes are checked for: one being created, or one that exists; FIFO or not. */
export interface AttributeTarget {
  creating: boolean;
  fifo: boolean;
}

export function checkAttributes(
  attributes: Record<string, string>,
  place: SqsPlace,
  kind: AttributeTarget,
): RequestedAttributes {
  const out: RequestedAttributes = { stored: {} };
  for (const [name, value] of Object.entries(attributes)) {
    if (name === 'RedrivePolicy') out.redrivePolicy = parseRedrivePolicy(value, place);
    else if (name === 'VisibilityTimeout') out.visibilityTimeout = Number(SETTABLE[name]!(value, name));
    else if (Object.hasOwn(SETTABLE, name)) out.stored[name] = SETTABLE[name]!(value, name);
    else if (name === 'FifoQueue') {
      const stored = checkFifoQueue(value, kind);
      if (stored !== undefined && kind.creating) out.stored[name] = stored;
    } else if (Object.hasOwn(FIFO_SETTABLE, name)) {
      if (!kind.fifo) throw notForStandardQueues(name);
      out.stored[name] = FIFO_SETTABLE[name]!(value, name);
    } else if (READ_ONLY.includes(name)) {
      throw new SqsError('InvalidAttributeName', `Attribute ${name} is read-only.`);
    } else throw new SqsError('InvalidAttributeName', `Unknown Attribute ${name}.`);
  }
  return out;
}

/** `{"deadLetterTargetArn": "arn:aws:sqs:...", "maxReceiveCount": 5}`, or null for "" (remove it). */
function parseRedrivePolicy(text: string, place: SqsPlace): RedrivePolicy | null {
  if (text === '') return null;
  let policy: unknown;
  try {
    policy = parseJsonDocument(text);
  } catch (err) {
    const why =
      err instanceof NestingError
        ? `Redrive policy ${err.message}.`
        : 'Redrive policy is not a valid JSON map.';
    throw invalidValue('RedrivePolicy', text, why);
  }
  if (typeof policy !== 'object' || policy === null || Array.isArray(policy)) {
    throw invalidValue('RedrivePolicy', text, 'Redrive policy is not a valid JSON map.');
  }
  const { deadLetterTargetArn, maxReceiveCount, ...rest } = policy as Record<string, unknown>;
  const unknown = Object.keys(rest)[0];
  if (unknown !== undefined) throw invalidValue('RedrivePolicy', text, `Unknown key ${preview(unknown)}.`);
  const count = typeof maxReceiveCount === 'string' ? Number(maxReceiveCount) : maxReceiveCount;
  if (typeof count !== 'number' || !Number.isInteger(count) || count < 1 || count > MAX_ATTEMPTS_LIMIT) {
    throw invalidValue(
      'RedrivePolicy',
      text,
      `Invalid value for maxReceiveCount: ${preview(maxReceiveCount)}, valid values are from 1 to ${MAX_ATTEMPTS_LIMIT} both inclusive.`,
    );
  }
  const target = typeof deadLetterTargetArn === 'string' ? queueOfArn(deadLetterTargetArn, place) : undefined;
  if (target === undefined) throw invalidValue('RedrivePolicy', text, 'Dead letter target does not exist.');
  return { deadLetterQueue: target, maxReceiveCount: count };
}

/** Every attribute name GetQueueAttributes knows (All asks for all of them; FIFO ones of FIFO queues). */
const READABLE = ['VisibilityTimeout', 'RedrivePolicy', ...Object.keys(SETTABLE), ...READ_ONLY];
const READABLE_FIFO = [...READABLE, ...FIFO_ONLY];

/** The attributes GetQueueAttributes answers, for the names asked (unknown names are an error). */
export function readAttributes(queue: SqsQueue, place: SqsPlace, names: string[]): Record<string, string> {
  for (const name of names) {
    if (name !== 'All' && !READABLE.includes(name) && !FIFO_ONLY.includes(name)) {
      throw new SqsError('InvalidAttributeName', `Unknown Attribute ${name}.`);
    }
  }
  // A standard queue asked for a FIFO attribute answers without it.
  const readable = queue.fifo ? READABLE_FIFO : READABLE;
  const wanted = names.includes('All') ? readable : names.filter((n) => readable.includes(n));
  const stored = storedAttributes(queue.meta, queue.fifo);
  const seconds = (d: Date) => String(Math.floor(d.getTime() / 1000));
  const all: Record<string, string | undefined> = {
    ...stored,
    QueueArn: queueArn(place, queue.name),
    ApproximateNumberOfMessages: String(queue.stats?.ready ?? 0),
    ApproximateNumberOfMessagesNotVisible: String(queue.stats?.claimed ?? 0),
    // Jobs waiting for parents are not receivable yet either: SQS's nearest word for them is delayed.
    ApproximateNumberOfMessagesDelayed: String(
      Number(queue.stats?.scheduled ?? 0) + Number(queue.stats?.waiting ?? 0),
    ),
    CreatedTimestamp: seconds(queue.row.created_at),
    LastModifiedTimestamp: seconds(queue.row.updated_at),
    VisibilityTimeout: String(Math.round(queue.leaseMs / 1000)),
    RedrivePolicy: queue.deadLetterQueue
      ? JSON.stringify({
          deadLetterTargetArn: queueArn(place, queue.deadLetterQueue),
          maxReceiveCount: queue.maxAttempts,
        })
      : undefined,
  };
  const out: Record<string, string> = {};
  for (const name of wanted) {
    const value = all[name];
    if (value !== undefined && value !== '') out[name] = value;
  }
  return out;
}

/**
 * The attributes a CreateQueue asks for that differ from an existing queue's (SQS then answers
 * QueueNameExists). Tags and the SQS-only attributes compare as stored.
 */
export function differingAttribute(queue: SqsQueue, requested: RequestedAttributes): string | undefined {
  const stored = storedAttributes(queue.meta, queue.fifo);
  for (const [name, value] of Object.entries(requested.stored)) if (stored[name] !== value) return name;
  if (requested.visibilityTimeout !== undefined && leaseOf(requested.visibilityTimeout) !== queue.leaseMs) {
    return 'VisibilityTimeout';
  }
  if (requested.redrivePolicy !== undefined) {
    const policy = requested.redrivePolicy;
    if ((policy?.deadLetterQueue ?? undefined) !== queue.deadLetterQueue) return 'RedrivePolicy';
    if (policy && policy.maxReceiveCount !== queue.maxAttempts) return 'RedrivePolicy';
  }
  return undefined;
}

/**
 * The lease for a visibility timeout. Baton's shortest lease is 1 s, so a timeout of 0 gives 1 s
 * (docs/sqs.md); ChangeMessageVisibility to 0 is handled apart, as "visible again now".
 */
export function leaseOf(visibilityTimeoutSeconds: number): number {
  return Math.max(1000, visibilityTimeoutSeconds * 1000);
}

/** The queue's meta after a change of attributes (and its dead-letter route). */
export function metaWith(meta: QueueMeta, requested: RequestedAttributes): QueueMeta {
  const attributes = { ...meta.sqs?.attributes };
  for (const [name, value] of Object.entries(requested.stored)) {
    if (value === '') delete attributes[name];
    else attributes[name] = value;
  }
  const out: QueueMeta = { ...meta, sqs: { ...meta.sqs, attributes } };
  if (requested.redrivePolicy === null) delete out.dead_letter_queue;
  else if (requested.redrivePolicy) out.dead_letter_queue = requested.redrivePolicy.deadLetterQueue;
  return out;
}
