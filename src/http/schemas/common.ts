import { type TSchema, Type } from 'typebox';
import {
  DOT_SEGMENTS,
  GROUP_NAME_PATTERN,
  JOB_ID_PATTERN,
  LEASE_TOKEN_PATTERN,
  LIST_LIMIT_MAX,
  PRINTABLE_FORMAT,
  PRINTABLE_PATTERN,
  QUEUE_NAME_PATTERN,
} from '../../jobs/limits.js';

/** Schema pieces every route file uses, defined once. */

/** Bodies reject unknown fields, so a typo such as `delay` for `delay_ms` is a 400 naming it. */
export const strict = { additionalProperties: false } as const;

/** An RFC 3339 timestamp; in requests, checked and converted to UTC by http/timestamps.ts. */
export const Timestamp = (description?: string) =>
  Type.String({ format: 'date-time', ...(description ? { description } : {}) });

export const Nullable = <T extends Parameters<typeof Type.Union>[0][number]>(t: T) =>
  Type.Union([t, Type.Null()]);

/**
 * Integers say their width, so generated clients in typed languages pick a type that holds every
 * value: an integer without a format is a 32-bit int to OpenAPI Generator's Java and Go, and a
 * retention or delay in ms (up to ten years) overflows it. Int32 is for values bounded well inside
 * it (attempts, priorities, batch sizes, leases); Int64 for durations that can exceed 24.8 days and
 * for counts of jobs. (The server checks the bounds, not the width: see http/validation.ts.)
 */
type IntegerOptions = NonNullable<Parameters<typeof Type.Integer>[0]>;
export const Int32 = (options: IntegerOptions = {}) => Type.Integer({ format: 'int32', ...options });
export const Int64 = (options: IntegerOptions = {}) => Type.Integer({ format: 'int64', ...options });

/**
 * A keyset-paged list: the page's items under `key`, and the cursor of the next page. Every list of
 * the API has this shape.
 */
export const PageOf = <T extends TSchema>(key: string, item: T, $id: string) =>
  Type.Object(
    {
      [key]: Type.Array(item),
      next_cursor: Nullable(
        Type.String({ description: 'Pass as cursor for the next page; null on the last.' }),
      ),
    },
    { $id },
  );

/** The query of a keyset-paged list: how many, and the cursor a previous page answered. */
export const PageQuery = (cursorMax: number) =>
  Type.Object(
    {
      limit: Type.Optional(Int32({ minimum: 1, maximum: LIST_LIMIT_MAX, default: 100 })),
      cursor: Type.Optional(Type.String({ maxLength: cursorMax })),
    },
    strict,
  );

/** Any JSON value, passed through as is. */
export const Json = (description: string) => Type.Unknown({ description });

/** Text of bounded length with no control characters or unpaired surrogates (see jobs/limits.ts). */
export const PrintableText = (maxLength: number, description: string) =>
  Type.String({ minLength: 1, maxLength, pattern: PRINTABLE_PATTERN, format: PRINTABLE_FORMAT, description });

/**
 * A name being created (a queue, a group, a schedule) is not "." or "..", which no URL can carry
 * (jobs/limits.ts, DOT_SEGMENTS). Written as `not` rather than folded into the pattern: a lookahead is
 * not every regex dialect's, and generated clients check patterns. Names that only look a row up
 * keep the plain pattern, so rows made before the rule stay readable and removable.
 */
export const notDotSegment = { not: { enum: [...DOT_SEGMENTS] } };

const QUEUE_NAME_DESCRIPTION = 'Queue name: letters, digits, ".", "_" and "-", at most 128 characters.';

export const QueueName = Type.String({
  pattern: QUEUE_NAME_PATTERN,
  description: QUEUE_NAME_DESCRIPTION,
  examples: ['emails'],
});

/** The name of a queue a request may create (enqueue, PUT). */
export const NewQueueName = Type.String({
  pattern: QUEUE_NAME_PATTERN,
  ...notDotSegment,
  description: `${QUEUE_NAME_DESCRIPTION} Not "." or "..".`,
  examples: ['emails'],
});

const GROUP_NAME_DESCRIPTION =
  'A group of jobs within a queue (a tenant, a customer, an API key): 1 to 128 printable ASCII ' +
  'characters, no spaces (percent-encode it in a URL path). Groups are served in turn and can have their ' +
  'own limits.';

export const GroupName = Type.String({
  pattern: GROUP_NAME_PATTERN,
  description: GROUP_NAME_DESCRIPTION,
  examples: ['customer:42'],
});

/** The group of a job being enqueued, or of a group override being made. */
export const NewGroupName = Type.String({
  pattern: GROUP_NAME_PATTERN,
  ...notDotSegment,
  description: `${GROUP_NAME_DESCRIPTION} Not "." or "..".`,
  examples: ['customer:42'],
});

export const JobId = Type.String({
  pattern: JOB_ID_PATTERN,
  description: 'Job id: a decimal string without leading zeros.',
  examples: ['42'],
});

export const LeaseToken = Type.String({
  format: 'uuid',
  pattern: LEASE_TOKEN_PATTERN,
  description: 'The token minted by the claim that handed you this job.',
});
