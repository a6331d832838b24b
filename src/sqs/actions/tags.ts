import { isPrintable } from '../../jobs/limits.js';
import { type Action, queueOf } from '../call.js';
import { invalidValue, missingParameter, SqsError } from '../errors.js';
import { NOT_PRINTABLE, stringList, stringMap } from '../input.js';

/** Queue tags: kept in the queue's meta.sqs.tags, at most 50 per queue, as SQS allows. */
const MAX_TAGS = 50;

/** Tags after adding `added` to `current`, checked as SQS checks them. */
export function checkTags(
  added: Record<string, string>,
  current: Record<string, string>,
): Record<string, string> {
  const out: Record<string, string> = Object.assign(Object.create(null), current);
  for (const [key, value] of Object.entries(added)) {
    if (key.length < 1 || key.length > 128 || key.toLowerCase().startsWith('aws:')) {
      throw new SqsError(
        'InvalidParameterValue',
        `Tag key '${key.slice(0, 130)}' must be 1-128 characters and not start with "aws:".`,
      );
    }
    if (value.length > 256)
      throw new SqsError('InvalidParameterValue', `Tag value for '${key}' must be at most 256 characters.`);
    // Tags are kept in the queue's jsonb meta, which cannot hold a NUL or an unpaired surrogate.
    if (!isPrintable(key) || !isPrintable(value)) {
      throw invalidValue(
        isPrintable(key) ? `Tags.${key}` : 'Tags',
        isPrintable(key) ? value : key,
        NOT_PRINTABLE,
      );
    }
    out[key] = value;
  }
  if (Object.keys(out).length > MAX_TAGS) {
    throw new SqsError('InvalidParameterValue', `Too many tags: a queue may have at most ${MAX_TAGS}.`);
  }
  return out;
}

export const tagQueue: Action = async (call, input) => {
  const queue = queueOf(call, input);
  if (input.Tags === undefined) throw missingParameter('Tags');
  const current = await call.deps.queues.fresh(queue);
  const tags = checkTags(stringMap(input, 'Tags'), current.meta.sqs?.tags ?? {});
  await call.deps.service.queues.configure(queue, {
    meta: { ...current.meta, sqs: { ...current.meta.sqs, tags } },
  });
  return {};
};

export const untagQueue: Action = async (call, input) => {
  const queue = queueOf(call, input);
  if (input.TagKeys === undefined) throw missingParameter('TagKeys');
  const current = await call.deps.queues.fresh(queue);
  const tags: Record<string, string> = Object.assign(Object.create(null), current.meta.sqs?.tags);
  for (const key of stringList(input, 'TagKeys')) delete tags[key];
  await call.deps.service.queues.configure(queue, {
    meta: { ...current.meta, sqs: { ...current.meta.sqs, tags } },
  });
  return {};
};

export const listQueueTags: Action = async (call, input) => {
  const queue = queueOf(call, input);
  const tags = (await call.deps.queues.fresh(queue)).meta.sqs?.tags ?? {};
  return Object.keys(tags).length > 0 ? { Tags: tags } : {};
};
