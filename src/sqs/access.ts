import { type ApiKey, keyAllowsQueue, type Scope } from '../auth/api-keys.js';
import { SqsError } from './errors.js';

/**
 * Who may call which action. A request signed with a key pair acts as the API key the pair names
 * (BATON_SQS_CREDENTIALS), with the same scopes and queue patterns as on the native API: sending
 * needs `producer`; receiving, deleting and changing visibility need `consumer`; creating, deleting,
 * purging, configuring and tagging queues need `admin` (which may do everything); reading a queue's
 * URL, attributes and tags needs any scope. A key limited to queue patterns cannot name another
 * queue in any parameter (QueueUrl, QueueName, a RedrivePolicy's target), and ListQueues and
 * ListDeadLetterSourceQueues show it only the queues it may use.
 */
export const ACTION_SCOPES: Record<string, Scope[]> = {
  SendMessage: ['producer'],
  SendMessageBatch: ['producer'],
  ReceiveMessage: ['consumer'],
  DeleteMessage: ['consumer'],
  DeleteMessageBatch: ['consumer'],
  ChangeMessageVisibility: ['consumer'],
  ChangeMessageVisibilityBatch: ['consumer'],
  CreateQueue: ['admin'],
  DeleteQueue: ['admin'],
  PurgeQueue: ['admin'],
  SetQueueAttributes: ['admin'],
  TagQueue: ['admin'],
  UntagQueue: ['admin'],
  GetQueueUrl: ['producer', 'consumer'],
  GetQueueAttributes: ['producer', 'consumer'],
  ListQueues: ['producer', 'consumer'],
  ListQueueTags: ['producer', 'consumer'],
  ListDeadLetterSourceQueues: ['producer', 'consumer'],
  ListMessageMoveTasks: ['producer', 'consumer'],
};

/** The caller of a request: its API key, or undefined when authentication is off. */
export interface Caller {
  key: ApiKey | undefined;
  /** SenderId of the messages it sends: the access key id it signed with, or "anonymous". */
  senderId: string;
}

export function checkScope(caller: Caller, action: string): void {
  const key = caller.key;
  if (!key || key.scopes.has('admin')) return;
  const scopes: Scope[] = Object.hasOwn(ACTION_SCOPES, action) ? ACTION_SCOPES[action]! : ['admin'];
  if (!scopes.some((s) => key.scopes.has(s))) {
    const needs = [...new Set([...scopes, 'admin'])].join(' or ');
    throw new SqsError('AccessDenied', `API key "${key.name}" may not call ${action} (it needs ${needs}).`);
  }
}

export function checkQueue(caller: Caller, queue: string): void {
  if (caller.key && !keyAllowsQueue(caller.key, queue)) {
    throw new SqsError('AccessDenied', `API key "${caller.key.name}" may not use queue "${queue}".`);
  }
}

export function mayUseQueue(caller: Caller, queue: string): boolean {
  return !caller.key || keyAllowsQueue(caller.key, queue);
}
