import { queuePatternsOf } from '../../auth/api-keys.js';
import { LIVE_STATES } from '../../job-states.js';
import { DOT_SEGMENT_MESSAGE, isDotSegment, MAX_ATTEMPTS_LIMIT } from '../../jobs/limits.js';
import { isFifoQueue } from '../../queues/queue-settings.js';
import type { QueueChanges, QueueRow } from '../../queues/queue-store.js';
import { checkQueue, mayUseQueue } from '../access.js';
import { type Action, queueOf, type SqsCall } from '../call.js';
import { invalidValue, SqsError } from '../errors.js';
import {
  optionalInt,
  optionalString,
  optionalText,
  requiredString,
  stringList,
  stringMap,
} from '../input.js';
import {
  checkAttributes,
  DEFAULT_VISIBILITY_TIMEOUT_S,
  differingAttribute,
  leaseOf,
  metaWith,
  type RedrivePolicy,
  readAttributes,
  sqsQueueOf,
} from '../queue-attributes.js';
import { queueUrl } from '../queue-url.js';
import { checkTags } from './tags.js';

/** Queue actions: create, find, list, configure, purge and delete queues. */

/** SQS queue names: 1-80 characters; Baton also allows "." (as its own queue names do). */
const CREATE_NAME = /^[A-Za-z0-9._-]{1,80}$/;
const FIFO_SUFFIX = '.fifo';

const urlOf = (call: SqsCall, queue: string) => queueUrl(call.baseUrl, call.deps.place, queue);

/**
 * A RedrivePolicy's target must exist, be another queue, be one the caller may use, and be of the
 * source's kind: a FIFO queue's dead-letter queue is a FIFO queue (so its dead messages stay in
 * their groups, in order), a standard queue's a standard one, as SQS requires.
 */
async function checkDeadLetterTarget(
  call: SqsCall,
  source: { name: string; fifo: boolean },
  policy: RedrivePolicy,
): Promise<void> {
  const text = `deadLetterTargetArn for ${policy.deadLetterQueue}`;
  if (policy.deadLetterQueue === source.name) {
    throw invalidValue('RedrivePolicy', text, 'Dead letter target must be another queue.');
  }
  checkQueue(call.caller, policy.deadLetterQueue);
  const target = await call.deps.service.queues.find(policy.deadLetterQueue);
  if (!target) throw invalidValue('RedrivePolicy', text, 'Dead letter target does not exist.');
  if (isFifoQueue(target.queue.meta) !== source.fifo) {
    throw invalidValue('RedrivePolicy', text, 'Dead-letter queue must be same type of queue as the source.');
  }
}

export const createQueue: Action = async (call, input) => {
  const { config, place, queues } = call.deps;
  const name = requiredString(input, 'QueueName');
  const attributes = stringMap(input, 'Attributes');
  // A FIFO queue is asked for with FifoQueue=true, and its name ends in .fifo; neither goes alone.
  const fifo = attributes.FifoQueue?.toLowerCase() === 'true';
  if (!CREATE_NAME.test(name) || fifo !== name.endsWith(FIFO_SUFFIX)) {
    throw invalidValue(
      'QueueName',
      name,
      fifo
        ? 'The name of a FIFO queue can only include alphanumeric characters, hyphens, periods, or underscores, must end with .fifo suffix and be 1 to 80 in length.'
        : name.endsWith(FIFO_SUFFIX) && CREATE_NAME.test(name)
          ? 'A queue name ending in .fifo is a FIFO queue: create it with the attribute FifoQueue set to true.'
          : 'Can only include alphanumeric characters, hyphens, periods, or underscores. 1 to 80 in length.',
    );
  }
  if (isDotSegment(name)) throw invalidValue('QueueName', name, `The queue name ${DOT_SEGMENT_MESSAGE}.`);
  checkQueue(call.caller, name);
  const requested = checkAttributes(attributes, place, { creating: true, fifo });
  const tags = checkTags(stringMap(input, input.tags !== undefined ? 'tags' : 'Tags'), {});
  if (requested.redrivePolicy) await checkDeadLetterTarget(call, { name, fifo }, requested.redrivePolicy);

  const differingFrom = (queue: QueueRow) => differingAttribute(sqsQueueOf({ queue }, config), requested);
  const { created, queue } = await call.deps.service.queues.createOnce(name, differingFrom, {
    lease_ms: leaseOf(requested.visibilityTimeout ?? DEFAULT_VISIBILITY_TIMEOUT_S),
    // Without a RedrivePolicy SQS redelivers until retention ends; Baton's bound is its most attempts.
    max_attempts: requested.redrivePolicy?.maxReceiveCount ?? MAX_ATTEMPTS_LIMIT,
    meta: metaWith({ sqs: { tags } }, requested),
    // FIFO: at most one message of a group in flight (exact across replicas: the flow claim), so a
    // group's next message waits for the delete, or the visibility timeout, of the one before it.
    // Grouped from the start, so that its claims serve groups even before its first send commits (and
    // for a dead-letter queue, whose messages arrive by the leader's move, not by a send).
    ...(fifo ? { group_concurrency_limit: 1, grouped: true as const } : {}),
  });
  if (!created) {
    // It existed (or another CreateQueue made it first): the same attributes are no change.
    const differing = differingFrom(queue);
    if (differing) {
      throw new SqsError(
        'QueueNameExists',
        `A queue already exists with the same name and a different value for attribute ${differing}`,
      );
    }
  }
  queues.forget(name);
  return { QueueUrl: urlOf(call, name) };
};

export const getQueueUrl: Action = async (call, input) => {
  const name = requiredString(input, 'QueueName');
  const owner = optionalString(input, 'QueueOwnerAWSAccountId');
  if (owner !== undefined && owner !== call.deps.place.accountId) {
    throw new SqsError('QueueDoesNotExist', 'The specified queue does not exist.');
  }
  if (!/^[A-Za-z0-9._-]{1,128}$/.test(name))
    throw new SqsError('QueueDoesNotExist', 'The specified queue does not exist.');
  checkQueue(call.caller, name);
  await call.deps.queues.fresh(name);
  return { QueueUrl: urlOf(call, name) };
};

/** NextToken of ListQueues and ListDeadLetterSourceQueues: the last queue name of the page. */
const tokenOf = (name: string) => Buffer.from(name, 'utf8').toString('base64url');
function afterToken(token: string | undefined): string | undefined {
  if (token === undefined || token === '') return undefined;
  const name = Buffer.from(token, 'base64url').toString('utf8');
  if (!/^[A-Za-z0-9._-]{1,128}$/.test(name) || tokenOf(name) !== token) {
    throw invalidValue('NextToken', token, 'Invalid NextToken value.');
  }
  return name;
}

export const listQueuesAction: Action = async (call, input) => {
  const prefix = optionalText(input, 'QueueNamePrefix');
  const maxResults = optionalInt(input, 'MaxResults', 1, 1000);
  const after = afterToken(optionalString(input, 'NextToken'));
  const limit = maxResults ?? 1000;
  // A key limited to some queues sees only those: the filter is in the query, so pages stay full.
  const rows = await call.deps.service.queues.list(
    limit,
    after,
    queuePatternsOf(call.caller.key),
    prefix || undefined,
  );
  const urls = rows.map((r) => urlOf(call, r.queue.name));
  const last = rows.at(-1);
  return {
    ...(urls.length > 0 ? { QueueUrls: urls } : {}),
    ...(maxResults !== undefined && rows.length === limit && last
      ? { NextToken: tokenOf(last.queue.name) }
      : {}),
  };
};

export const deleteQueueAction: Action = async (call, input) => {
  const queue = queueOf(call, input);
  // SQS deletes a queue with its messages; Baton cancels them (they stay readable in its history).
  await call.deps.service.queues.delete(queue, true);
  // A queue created again under this name starts with no deduplication ids (nor idempotency keys).
  await call.deps.service.queues.forgetKeys(queue);
  call.deps.queues.forget(queue);
  return {};
};

export const purgeQueue: Action = async (call, input) => {
  const queue = queueOf(call, input);
  const { fifo } = await call.deps.queues.fresh(queue);
  // All of them, in flight too, as SQS does; their holders' deletes then succeed as stale ones do.
  await call.deps.service.queues.purge(queue, LIVE_STATES);
  // SQS empties a FIFO queue's deduplication window too: the same ids may be sent again at once.
  if (fifo) await call.deps.service.queues.forgetKeys(queue);
  return {};
};

export const getQueueAttributes: Action = async (call, input) => {
  const queue = queueOf(call, input);
  const names = stringList(input, 'AttributeNames');
  const attributes = readAttributes(await call.deps.queues.fresh(queue), call.deps.place, names);
  return Object.keys(attributes).length > 0 ? { Attributes: attributes } : {};
};

export const setQueueAttributes: Action = async (call, input) => {
  const queue = queueOf(call, input);
  if (input.Attributes === undefined)
    throw new SqsError('MissingParameter', 'The request must contain the parameter Attributes.');
  const current = await call.deps.queues.fresh(queue);
  const requested = checkAttributes(stringMap(input, 'Attributes'), call.deps.place, {
    creating: false,
    fifo: current.fifo,
  });
  if (requested.redrivePolicy) {
    await checkDeadLetterTarget(call, { name: queue, fifo: current.fifo }, requested.redrivePolicy);
  }
  const changes: QueueChanges = { meta: metaWith(current.meta, requested) };
  if (requested.visibilityTimeout !== undefined) changes.lease_ms = leaseOf(requested.visibilityTimeout);
  if (requested.redrivePolicy !== undefined) {
    changes.max_attempts = requested.redrivePolicy?.maxReceiveCount ?? MAX_ATTEMPTS_LIMIT;
  }
  await call.deps.service.queues.configure(queue, changes);
  call.deps.queues.forget(queue);
  return {};
};

export const listDeadLetterSourceQueues: Action = async (call, input) => {
  const queue = queueOf(call, input);
  await call.deps.queues.fresh(queue);
  const maxResults = optionalInt(input, 'MaxResults', 1, 1000);
  const after = afterToken(optionalString(input, 'NextToken'));
  const sources = (await call.deps.service.queues.deadLetterSources(queue))
    .map((r) => r.queue)
    .filter((name) => mayUseQueue(call.caller, name) && (after === undefined || name > after));
  const page = maxResults === undefined ? sources : sources.slice(0, maxResults);
  const last = page.at(-1);
  return {
    queueUrls: page.map((name) => urlOf(call, name)),
    ...(maxResults !== undefined && sources.length > page.length && last ? { NextToken: tokenOf(last) } : {}),
  };
};
