import { Type } from 'typebox';
import { Int32, Int64, Nullable, QueueName, strict, Timestamp } from './common.js';
import { ref } from './ref.js';

/** Message moves: a dead-letter queue's ready jobs sent back (service/moves.ts). */

export const MoveRequest = Type.Object(
  {
    destination: Type.Optional(
      Type.Unsafe<string>({
        ...QueueName,
        description:
          'Send every job to this queue. Left out: each job goes back to the queue it died in (the queue must be a ' +
          'dead-letter queue).',
      }),
    ),
    max_per_second: Type.Optional(
      Int32({
        minimum: 1,
        maximum: 500,
        description: 'At most this many jobs a second. Left out: batches of 1,000.',
      }),
    ),
  },
  {
    ...strict,
    $id: 'MoveRequest',
    description:
      "Which queue the jobs go to, and how fast. The move takes the queue's ready jobs as of its start.",
    examples: [{}, { destination: 'emails', max_per_second: 50 }],
  },
);

export const MoveId = Type.String({
  format: 'uuid',
  description: 'The id of a move, as its start answered it.',
});

export const MoveParams = Type.Object({ queue: QueueName, id: MoveId }, strict);

export const Move = Type.Object(
  {
    id: MoveId,
    queue: Type.String({ description: 'The queue whose ready jobs move.' }),
    destination: Nullable(Type.String({ description: 'null: each job back to the queue it died in.' })),
    max_per_second: Nullable(Int32()),
    status: Type.Union(
      [Type.Literal('running'), Type.Literal('completed'), Type.Literal('cancelled'), Type.Literal('failed')],
      {
        description:
          'running until nothing it may move is left, it is cancelled, or it fails (failure_reason).',
      },
    ),
    moved: Int64({ description: 'Jobs moved so far.' }),
    to_move: Int64({ description: 'Ready jobs of the queue when the move started.' }),
    failure_reason: Nullable(Type.String()),
    started_at: Timestamp(),
    finished_at: Nullable(Timestamp()),
  },
  { $id: 'Move', description: "A move of a queue's ready jobs to other queues." },
);

export const MoveList = Type.Object(
  {
    moves: Type.Array(ref(Move), { description: 'The latest first, at most 10.' }),
    dead_letter_sources: Type.Array(Type.String(), {
      description:
        'Queues whose dead jobs come to this one (an SQS RedrivePolicy names it): empty for a queue that is no dead-letter queue.',
    }),
  },
  { $id: 'MoveList' },
);
