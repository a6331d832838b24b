import { Type } from 'typebox';
import { Int32, Int64, Nullable, Timestamp } from './common.js';
import { ref } from './ref.js';

const Count = (description: string) => Int64({ minimum: 0, description });

export const OverviewMinute = Type.Object(
  {
    minute: Timestamp('The minute (UTC, to the minute).'),
    enqueued: Count('Jobs that arrived in the minute, over every queue.'),
    completed: Count('Jobs completed in the minute.'),
    failed: Count('Jobs that went dead in the minute.'),
    attempts_failed: Count(
      'Attempts that failed in the minute (a nack, a lease that ran out, a deadline), retried or not.',
    ),
  },
  { $id: 'OverviewMinute' },
);

export const AttentionQueue = Type.Object(
  {
    queue: Type.String(),
    paused: Type.Boolean(),
    dead: Count('Dead jobs kept, as the leader last counted finished jobs (about once a minute).'),
    failed_last_hour: Count('Jobs that went dead in the last hour.'),
    attempts_failed_last_hour: Count('Attempts that failed in the last hour, retried or not.'),
    failing: Count('Live jobs whose last attempt failed (retrying), as the leader last counted them.'),
    oldest_ready_age_ms: Nullable(
      Int64({ minimum: 0, description: 'How long the oldest ready job has waited.' }),
    ),
  },
  { $id: 'AttentionQueue' },
);

export const Overview = Type.Object(
  {
    as_of: Timestamp("The database's time of the reading."),
    totals: Type.Object(
      {
        queues: Int32(),
        paused: Int32({ description: 'Paused queues.' }),
        waiting: Count('Jobs waiting for parents.'),
        scheduled: Count('Jobs waiting for their run_at.'),
        ready: Count('Jobs claimable now.'),
        claimed: Count('Jobs under a lease.'),
        dead: Count('Dead jobs kept (within retention), as of finished_counted_at.'),
        failing: Count(
          'Live jobs whose last attempt failed: waiting for a retry, or ready or running again.',
        ),
        counted_at: Nullable(
          Timestamp(
            'When the maintenance leader last counted live jobs (the latest of the queues): the time of every ' +
              'figure but dead; null: not yet.',
          ),
        ),
        finished_counted_at: Nullable(
          Timestamp(
            'When the maintenance leader last counted finished jobs (the latest of the queues, about once a ' +
              'minute each): the time of dead; null: not yet.',
          ),
        ),
      },
      {
        description:
          'Every queue the key may see, as the leader last counted them: live jobs every tick (counted_at), ' +
          'finished ones about once a minute (finished_counted_at).',
      },
    ),
    minutes: Type.Array(ref(OverviewMinute), {
      description: 'The last hour, oldest first; a minute no queue sampled (all idle) is left out.',
    }),
    attention: Type.Array(ref(AttentionQueue), {
      description:
        'Up to 10 queues needing attention first: jobs failed (dead) in the last hour, attempts failed in the last ' +
        'hour, dead jobs kept, jobs failing now, the oldest ready job waiting over a minute, paused.',
    }),
  },
  { $id: 'Overview' },
);
