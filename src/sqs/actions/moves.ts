import { queuePatternsOf } from '../../auth/api-keys.js';
import { DomainError } from '../../errors.js';
import type { MessageMove } from '../../jobs/message-moves.js';
import { isFifoQueue } from '../../queues/queue-settings.js';
import { checkQueue } from '../access.js';
import type { Action, SqsCall } from '../call.js';
import { invalidValue, SqsError } from '../errors.js';
import { optionalInt, optionalString, requiredString } from '../input.js';
import { queueArn, queueOfArn } from '../queue-url.js';

/**
 * Message move tasks: StartMessageMoveTask, ListMessageMoveTasks and CancelMessageMoveTask, over
 * the service's moves (service/moves.ts). As SQS has it: the source is a dead-letter queue; without
 * DestinationArn each message goes back to the queue it died in (Baton remembers it when the
 * leader forwards a message, and a dead-letter queue of one queue sends the others there too); one
 * task of a queue runs at a time; MaxNumberOfMessagesPerSecond is 1-500; a TaskHandle names the
 * task and its source queue, and is listed only while the task runs. A task moves the messages
 * visible in the source when it starts, and ends COMPLETED, CANCELLED, or FAILED with a reason.
 */

const taskDoesNotExist = () =>
  new SqsError('ResourceNotFoundException', 'The specified task does not exist.');

/** A queue an ARN names, that exists and that the caller may use. */
async function queueOfArnParameter(
  call: SqsCall,
  parameter: string,
  arn: string,
): Promise<{ name: string; fifo: boolean }> {
  const name = queueOfArn(arn, call.deps.place);
  if (name === undefined)
    throw new SqsError('ResourceNotFoundException', `The resource ${arn.slice(0, 200)} does not exist.`);
  checkQueue(call.caller, name);
  const found = await call.deps.service.queues.find(name);
  if (!found)
    throw new SqsError(
      'ResourceNotFoundException',
      `The ${parameter === 'SourceArn' ? 'source' : 'destination'} queue does not exist.`,
    );
  return { name, fifo: isFifoQueue(found.queue.meta) };
}

/** TaskHandle: the task's id and its source queue's ARN, as SQS's handles carry both. */
const handleOf = (call: SqsCall, move: MessageMove) =>
  Buffer.from(
    JSON.stringify({ taskId: move.id, sourceArn: queueArn(call.deps.place, move.source_queue) }),
    'utf8',
  ).toString('base64');

function readHandle(call: SqsCall, handle: string): { id: string; source: string } {
  let parsed: unknown;
  try {
    parsed = JSON.parse(Buffer.from(handle, 'base64').toString('utf8'));
  } catch {
    throw taskDoesNotExist();
  }
  const { taskId, sourceArn } = (parsed ?? {}) as { taskId?: unknown; sourceArn?: unknown };
  if (typeof taskId !== 'string' || typeof sourceArn !== 'string') throw taskDoesNotExist();
  if (!/^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/.test(taskId))
    throw taskDoesNotExist();
  const source = queueOfArn(sourceArn, call.deps.place);
  if (source === undefined) throw taskDoesNotExist();
  checkQueue(call.caller, source);
  return { id: taskId, source };
}

export const startMessageMoveTask: Action = async (call, input) => {
  const source = await queueOfArnParameter(call, 'SourceArn', requiredString(input, 'SourceArn'));
  const destinationArn = optionalString(input, 'DestinationArn');
  const destination =
    destinationArn === undefined || destinationArn === ''
      ? undefined
      : await queueOfArnParameter(call, 'DestinationArn', destinationArn);
  const maxPerSecond = optionalInt(input, 'MaxNumberOfMessagesPerSecond', 1, 500);
  if ((await call.deps.service.queues.deadLetterSources(source.name)).length === 0) {
    throw invalidValue(
      'SourceArn',
      queueArn(call.deps.place, source.name),
      'Source queue must be configured as a Dead Letter Queue.',
    );
  }
  if (destination?.name === source.name) {
    throw invalidValue(
      'DestinationArn',
      destinationArn,
      'Destination queue must be another queue than the source queue.',
    );
  }
  if (destination && destination.fifo !== source.fifo) {
    throw invalidValue(
      'DestinationArn',
      destinationArn,
      'Destination queue must be same type of queue as the source.',
    );
  }
  try {
    const move = await call.deps.service.moves.start({
      source: source.name,
      ...(destination ? { destination: destination.name } : {}),
      ...(maxPerSecond !== undefined ? { maxPerSecond } : {}),
      patterns: queuePatternsOf(call.caller.key),
    });
    return { TaskHandle: handleOf(call, move) };
  } catch (err) {
    if (err instanceof DomainError && err.code === 'move_running') {
      throw new SqsError(
        'UnsupportedOperation',
        'There is already a task running. Only one active task is allowed for a source queue arn at a given time.',
      );
    }
    throw err;
  }
};

export const listMessageMoveTasks: Action = async (call, input) => {
  const source = await queueOfArnParameter(call, 'SourceArn', requiredString(input, 'SourceArn'));
  const maxResults = optionalInt(input, 'MaxResults', 1, 10) ?? 1;
  const moves = await call.deps.service.moves.list(source.name, maxResults);
  return {
    Results: moves.map((move) => ({
      ...(move.status === 'running' ? { TaskHandle: handleOf(call, move) } : {}),
      Status: move.status.toUpperCase(),
      SourceArn: queueArn(call.deps.place, move.source_queue),
      ...(move.destination_queue
        ? { DestinationArn: queueArn(call.deps.place, move.destination_queue) }
        : {}),
      ...(move.max_per_second !== null ? { MaxNumberOfMessagesPerSecond: move.max_per_second } : {}),
      ApproximateNumberOfMessagesMoved: Number(move.moved),
      ApproximateNumberOfMessagesToMove: Number(move.to_move),
      ...(move.failure_reason !== null ? { FailureReason: move.failure_reason } : {}),
      StartedTimestamp: move.started_at.getTime(),
    })),
  };
};

export const cancelMessageMoveTask: Action = async (call, input) => {
  const { id, source } = readHandle(call, requiredString(input, 'TaskHandle'));
  try {
    const move = await call.deps.service.moves.cancel(source, id);
    return { ApproximateNumberOfMessagesMoved: Number(move.moved) };
  } catch (err) {
    if (err instanceof DomainError && err.code === 'not_found') throw taskDoesNotExist();
    if (err instanceof DomainError && err.code === 'move_finished') {
      throw new SqsError('UnsupportedOperation', 'Only a task in RUNNING status can be cancelled.');
    }
    throw err;
  }
};
