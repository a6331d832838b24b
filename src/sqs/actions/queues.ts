import { queuePatternsOf } from '../../auth/api-keys.js';
import { cancelQueueJobs } from '../../jobs/cancel.js';
import { deleteQueue } from '../../jobs/delete-queue.js';
import { MAX_ATTEMPTS_LIMIT } from '../../jobs/limits.js';
import { LIVE_STATES } from '../../jobs/states.js';
import {
  deadLetterRoutes,
  getQueue,
  listQueues,
  type QueueChanges,
  upsertQueue,
} from '../../queues/queue-store.js';
import { checkQueue, mayUseQueue } from '../access.js';
import { type Action, queueOf, type SqsCall } from '../call.js';
import { invalidValue, SqsError } from '../errors.js';
import { optionalInt, optionalString, requiredString, stringList, stringMap } from '../input.js';
import {
  checkAttributes,
  DEFAULT_VISIBILITY_TIMEOUT_S,
  differingAttribute,
  fifoUnsupported,
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

const urlOf = (call: SqsCall, queue: string) => queueUrl(call.baseUrl, call.deps.place, queue);

/** A RedrivePolicy's target must exist, be another queue, and be one the caller may use. */
async function checkDeadLetterTarget(call: SqsCall, source: string, policy: RedrivePolicy): Promise<void> {
  const text = `deadLetterTargetArn for ${policy.deadLetterQueue}`;
  if (policy.deadLetterQueue === source) {
    throw invalidValue('RedrivePolicy', text, 'Dead letter target must be another queue.');
  }
  checkQueue(call.caller, policy.deadLetterQueue);
  if (!(await getQueue(call.deps.db, policy.deadLetterQueue))) {
    throw invalidValue('RedrivePolicy', text, 'Dead letter target does not exist.');
  }
}

export const createQueue: Action = async (call, input) => {
  const { db, config, place, queues } = call.deps;
  const name = requiredString(input, 'QueueName');
  if (name.endsWith('.fifo')) throw fifoUnsupported();
  if (!CREATE_NAME.test(name)) {
    throw invalidValue(
      'QueueName',
      name,
      'Can only include alphanumeric characters, hyphens, periods, or underscores. 1 to 80 in length.',
    );
  }
  checkQueue(call.caller, name);
  const requested = checkAttributes(stringMap(input, 'Attributes'), place, true);
  const tags = checkTags(stringMap(input, input.tags !== undefined ? 'tags' : 'Tags'), {});
  if (requested.redrivePolicy) await checkDeadLetterTarget(call, name, requested.redrivePolicy);

  const existing = await getQueue(db, name);
  if (existing) {
    const differing = differingAttribute(sqsQueueOf(existing, config), requested);
    if (differing) {
      throw new SqsError(
        'QueueNameExists',
        `A queue already exists with the same name and a different value for attribute ${differing}`,
      );
    }
    // Created by an enqueue: now it is managed, so the leader will not collect it when idle.
    if (existing.queue.auto_created) await upsertQueue(db, name, {});
    return { QueueUrl: urlOf(call, name) };
  }
  await upsertQueue(db, name, {
    lease_ms: leaseOf(requested.visibilityTimeout ?? DEFAULT_VISIBILITY_TIMEOUT_S),
    // Without a RedrivePolicy SQS redelivers until retention ends; Baton's bound is its most attempts.
    max_attempts: requested.redrivePolicy?.maxReceiveCount ?? MAX_ATTEMPTS_LIMIT,
    meta: metaWith({ sqs: { tags } }, requested),
  });
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
  const prefix = optionalString(input, 'QueueNamePrefix');
  const maxResults = optionalInt(input, 'MaxResults', 1, 1000);
  const after = afterToken(optionalString(input, 'NextToken'));
  const limit = maxResults ?? 1000;
  // A key limited to some queues sees only those: the filter is in the query, so pages stay full.
  const rows = await listQueues(
    call.deps.db,
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
  const cancelled = await deleteQueue(call.deps.db, queue, true);
  call.deps.metrics.cancelled(queue, cancelled);
  call.deps.queues.forget(queue);
  return {};
};

export const purgeQueue: Action = async (call, input) => {
  const queue = queueOf(call, input);
  await call.deps.queues.fresh(queue);
  // All of them, in flight too, as SQS does; their holders' deletes then succeed as stale ones do.
  const cancelled = await cancelQueueJobs(call.deps.db, queue, LIVE_STATES);
  call.deps.metrics.cancelled(queue, cancelled);
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
  const requested = checkAttributes(stringMap(input, 'Attributes'), call.deps.place, false);
  const current = await call.deps.queues.fresh(queue);
  if (requested.redrivePolicy) await checkDeadLetterTarget(call, queue, requested.redrivePolicy);
  const changes: QueueChanges = { meta: metaWith(current.meta, requested) };
  if (requested.visibilityTimeout !== undefined) changes.lease_ms = leaseOf(requested.visibilityTimeout);
  if (requested.redrivePolicy !== undefined) {
    changes.max_attempts = requested.redrivePolicy?.maxReceiveCount ?? MAX_ATTEMPTS_LIMIT;
  }
  await upsertQueue(call.deps.db, queue, changes);
  call.deps.queues.forget(queue);
  return {};
};

export const listDeadLetterSourceQueues: Action = async (call, input) => {
  const queue = queueOf(call, input);
  await call.deps.queues.fresh(queue);
  const maxResults = optionalInt(input, 'MaxResults', 1, 1000);
  const after = afterToken(optionalString(input, 'NextToken'));
  const sources = (await deadLetterRoutes(call.deps.db, queue))
    .map((r) => r.queue)
    .filter((name) => mayUseQueue(call.caller, name) && (after === undefined || name > after));
  const page = maxResults === undefined ? sources : sources.slice(0, maxResults);
  const last = page.at(-1);
  return {
    queueUrls: page.map((name) => urlOf(call, name)),
    ...(maxResults !== undefined && sources.length > page.length && last ? { NextToken: tokenOf(last) } : {}),
  };
};
