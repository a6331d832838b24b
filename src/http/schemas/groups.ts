import { Type } from 'typebox';
import { GROUP_WEIGHT_MAX } from '../../jobs/limits.js';
import {
  GroupName,
  Int32,
  Int64,
  NewGroupName,
  Nullable,
  PageOf,
  PageQuery,
  QueueName,
  strict,
  Timestamp,
} from './common.js';
import { ConcurrencyLimit, RateLimit } from './queues.js';
import { ref } from './ref.js';

/** Schemas of a queue's groups (flow control): their overrides, counts and limits. */

export const GroupParams = Type.Object({ queue: QueueName, group: GroupName }, strict);
/** PUT of a group's override: it may make the group's first row, so its name must be one a URL carries. */
export const NewGroupParams = Type.Object({ queue: QueueName, group: NewGroupName }, strict);

export const GroupConfigRequest = Type.Object(
  {
    concurrency_limit: Type.Optional(
      Nullable(ConcurrencyLimit("At most this many of the group's jobs claimed at once.")),
    ),
    rate_limit: Type.Optional(Nullable(ref(RateLimit))),
    weight: Type.Optional(
      Nullable(
        Int32({
          minimum: 1,
          maximum: GROUP_WEIGHT_MAX,
          description: 'Jobs the group gets per round when groups are served in turn (default 1).',
        }),
      ),
    ),
    paused: Type.Optional(Type.Boolean({ description: "A paused group's jobs are not claimed." })),
  },
  {
    ...strict,
    $id: 'GroupConfigRequest',
    description:
      "Overrides of the queue's group defaults for one group. Fields you give are set; fields you leave " +
      "out keep their value; null resets a field to the queue's group default.",
    examples: [{ concurrency_limit: 2, weight: 3 }, { paused: true }],
  },
);

export const Group = Type.Object(
  {
    queue: Type.String(),
    group: Nullable(
      Type.String({ description: 'null: the jobs without a group, which are served in turn as one group.' }),
    ),
    ready: Int64({ minimum: 0 }),
    claimed: Int64({ minimum: 0 }),
    scheduled: Int64({ minimum: 0 }),
    refreshed_at: Nullable(
      Timestamp("When the leader last counted the queue's groups (exact as of then; null: not yet)."),
    ),
    concurrency_limit: Nullable(Int32({ description: 'In effect: the override, else the queue default.' })),
    rate_limit: Nullable(ref(RateLimit)),
    weight: Int32(),
    paused: Type.Boolean(),
    overridden: Type.Array(Type.String(), {
      description: "Fields this group sets itself; the others follow the queue's group defaults.",
    }),
  },
  {
    $id: 'Group',
    description: 'A group of a queue: its counts, and the limits and weight in effect for it.',
  },
);

export const GroupList = PageOf('groups', ref(Group), 'GroupList');

export const GroupListQuery = PageQuery(400);

export const DeletedGroup = Type.Object(
  {
    queue: Type.String(),
    group: Type.String(),
    reset: Type.Boolean({ description: 'false when the group had no overrides.' }),
  },
  { $id: 'DeletedGroup' },
);
