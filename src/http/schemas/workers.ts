import { Type } from 'typebox';
import { LIST_LIMIT_MAX } from '../../jobs/limits.js';
import { Int32, Nullable, QueueName, strict, Timestamp } from './common.js';
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
