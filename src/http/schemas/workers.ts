import { Type } from 'typebox';
import { LIST_LIMIT_MAX, WORKER_ID_MAX } from '../../jobs/limits.js';
import { Int32, Nullable, PrintableText, QueueName, strict, Timestamp } from './common.js';
import { ref } from './ref.js';

export const LeaseHolder = Type.Object(
  {
    worker_id: Nullable(
      Type.String({ description: 'As the worker named itself on its claims; null: claims without one.' }),
    ),
    queue: Type.String(),
    jobs: Int32({ description: 'Jobs of this queue the worker holds under a lease now.' }),
    oldest_claimed_at: Timestamp('When the oldest of them was claimed.'),
    last_renewed_at: Timestamp('When one of its leases was last granted or renewed.'),
    next_expiry_at: Timestamp('The first of its leases to run out unless renewed.'),
  },
  { $id: 'LeaseHolder', description: "One worker's leases in one queue, from the claimed jobs." },
);

export const LeaseHolderList = Type.Object(
  {
    workers: Type.Array(ref(LeaseHolder), { description: 'Most jobs first.' }),
    announced: Type.Array(Type.Unsafe({ $ref: 'AnnouncedWorker' }), {
      description:
        'Workers that announced themselves (PUT /v1/workers/{id}) and were seen within BATON_WORKER_SILENCE_MS, ' +
        'idle or busy, busiest first.',
    }),
    as_of: Timestamp("The database's time of the reading."),
  },
  { $id: 'LeaseHolderList' },
);

export const LeaseHolderQuery = Type.Object(
  {
    queue: Type.Optional(QueueName),
    limit: Type.Optional(Int32({ minimum: 1, maximum: LIST_LIMIT_MAX, default: 100 })),
  },
  strict,
);

export const WorkerParams = Type.Object(
  {
    id: PrintableText(
      WORKER_ID_MAX,
      'The worker id it claims with (worker_id), percent-encoded in the path.',
    ),
  },
  strict,
);

export const WorkerAnnouncement = Type.Object(
  {
    queues: Type.Array(QueueName, {
      minItems: 1,
      maxItems: 100,
      uniqueItems: true,
      description: 'The queues it works (the key must be allowed each).',
    }),
    host: Type.Optional(PrintableText(255, 'The machine or container it runs on.')),
    pid: Type.Optional(Int32({ minimum: 0 })),
    concurrency: Type.Optional(
      Int32({ minimum: 1, maximum: 100_000, description: 'Jobs it runs at once, at most.' }),
    ),
    version: Type.Optional(PrintableText(100, 'Its own version, or its library’s.')),
  },
  {
    ...strict,
    $id: 'WorkerAnnouncement',
    description:
      'What a worker says of itself, sent when it starts and again as a heartbeat (every 15 s or so): it is listed ' +
      'while it announces or claims, idle or busy, and no longer after BATON_WORKER_SILENCE_MS of silence.',
    examples: [{ queues: ['emails'], host: 'web-3', pid: 4242, concurrency: 8, version: 'mailer 2.1.0' }],
  },
);

export const WorkerAnnounced = Type.Object(
  {
    announced: Type.Literal(true),
    silence_ms: Int32({ description: 'Announce again well within this (a third of it is a good beat).' }),
  },
  { $id: 'WorkerAnnounced' },
);

export const WorkerForgotten = Type.Object({ forgotten: Type.Literal(true) }, { $id: 'WorkerForgotten' });

export const AnnouncedWorker = Type.Object(
  {
    id: Type.String(),
    host: Nullable(Type.String()),
    pid: Nullable(Int32()),
    concurrency: Nullable(Int32()),
    version: Nullable(Type.String()),
    queues: Type.Array(Type.String()),
    started_at: Timestamp('When it first announced itself (again after a restart).'),
    last_seen_at: Timestamp('Its latest announcement or claim.'),
    busy: Type.Boolean({ description: 'It holds leases now.' }),
    jobs: Int32({ description: 'Jobs it holds under a lease now, in its queues.' }),
    job_ids: Type.Array(Type.String(), { description: 'The first 10 of them, oldest claim first.' }),
  },
  { $id: 'AnnouncedWorker', description: 'A worker that announced itself, seen lately.' },
);
