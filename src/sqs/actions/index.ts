import type { Action } from '../call.js';
import { SqsError } from '../errors.js';
import { deleteMessage, deleteMessageBatch } from './delete.js';
import { cancelMessageMoveTask, listMessageMoveTasks, startMessageMoveTask } from './moves.js';
import {
  createQueue,
  deleteQueueAction,
  getQueueAttributes,
  getQueueUrl,
  listDeadLetterSourceQueues,
  listQueuesAction,
  purgeQueue,
  setQueueAttributes,
} from './queues.js';
import { receiveMessage } from './receive.js';
import { sendMessage, sendMessageBatch } from './send.js';
import { listQueueTags, tagQueue, untagQueue } from './tags.js';
import { changeMessageVisibility, changeMessageVisibilityBatch } from './visibility.js';

/** Every SQS action Baton serves, by name (docs/sqs.md has the compatibility table). */
export const ACTIONS: Record<string, Action> = {
  CreateQueue: createQueue,
  GetQueueUrl: getQueueUrl,
  ListQueues: listQueuesAction,
  DeleteQueue: deleteQueueAction,
  PurgeQueue: purgeQueue,
  GetQueueAttributes: getQueueAttributes,
  SetQueueAttributes: setQueueAttributes,
  ListDeadLetterSourceQueues: listDeadLetterSourceQueues,
  TagQueue: tagQueue,
  UntagQueue: untagQueue,
  ListQueueTags: listQueueTags,
  SendMessage: sendMessage,
  SendMessageBatch: sendMessageBatch,
  ReceiveMessage: receiveMessage,
  DeleteMessage: deleteMessage,
  DeleteMessageBatch: deleteMessageBatch,
  ChangeMessageVisibility: changeMessageVisibility,
  ChangeMessageVisibilityBatch: changeMessageVisibilityBatch,
  StartMessageMoveTask: startMessageMoveTask,
  ListMessageMoveTasks: listMessageMoveTasks,
  CancelMessageMoveTask: cancelMessageMoveTask,
};

/** SQS actions Baton does not serve, and why, so a client learns more than "unknown action". */
const UNSUPPORTED: Record<string, string> = {
  AddPermission:
    'queue access is governed by Baton API keys (scopes and queue patterns), not by queue policies',
  RemovePermission:
    'queue access is governed by Baton API keys (scopes and queue patterns), not by queue policies',
};

export function actionNamed(name: string | undefined): Action {
  // Own properties only: "valueOf" or "constructor" names no action.
  if (name !== undefined && Object.hasOwn(ACTIONS, name)) return ACTIONS[name]!;
  if (name !== undefined && Object.hasOwn(UNSUPPORTED, name)) {
    throw new SqsError('UnsupportedOperation', `Baton does not support ${name}: ${UNSUPPORTED[name]}.`);
  }
  throw new SqsError(
    'InvalidAction',
    name === undefined
      ? 'The request names no action (X-Amz-Target: AmazonSQS.<Action>, or Action=<Action> in the form).'
      : `The action ${name.slice(0, 100)} is not valid for this endpoint.`,
  );
}
