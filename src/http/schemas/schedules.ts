import { Type } from 'typebox';
import {
  GROUP_NAME_PATTERN,
  MAX_ATTEMPTS_LIMIT,
  MAX_DELAY_MS,
  PRIORITY_MAX,
  PRIORITY_MIN,
  TIMEOUT_MS_MAX,
  TIMEOUT_MS_MIN,
  UNIQUE_KEY_MAX,
} from '../../jobs/limits.js';
import { SCHEDULE_NAME_PATTERN } from '../../schedules/definition.js';
import { CATCH_UP_ALL_MAX } from '../../schedules/occurrences.js';
import {
  Int32,
  Int64,
  Json,
  NewQueueName,
  Nullable,
  notDotSegment,
  PageOf,
  PageQuery,
  PrintableText,
  strict,
  Timestamp,
} from './common.js';
import { ref } from './ref.js';

const scheduleName = (create: boolean) =>
  Type.String({
    pattern: SCHEDULE_NAME_PATTERN,
    ...(create ? notDotSegment : {}),
    description: `Schedule name: letters, digits, ".", "_" and "-", at most 128 characters.${create ? ' Not "." or "..".' : ''}`,
    examples: ['nightly-report'],
  });

export const ScheduleParams = Type.Object({ name: scheduleName(false) }, strict);
/** PUT: the name of a schedule it may create. */
export const NewScheduleParams = Type.Object({ name: scheduleName(true) }, strict);

const OVERLAP = Type.Union([Type.Literal('allow'), Type.Literal('skip')], {
  description:
    'allow (default): every occurrence enqueues a job. skip: no new job while the previous one is still ' +
    'scheduled, ready or claimed (the occurrence counts as skipped).',
});
const CATCH_UP = Type.Union([Type.Literal('none'), Type.Literal('latest'), Type.Literal('all')], {
  description:
    'After downtime (occurrences the leader reaches more than BATON_SCHEDULE_GRACE_MS late, or more than one ' +
    'due at once): none: only an occurrence within the grace runs, the rest are missed; latest (default): one ' +
    `job, for the latest; all: a job for each, at most ${CATCH_UP_ALL_MAX} (the most recent).`,
});

const ON_CONFLICT = Type.Union([Type.Literal('keep'), Type.Literal('replace')], {
  description:
    'With unique_key, when a waiting job holds the key at an occurrence: keep (the default) folds the ' +
    'occurrence into that job; replace gives it the occurrence’s run_at (and the schedule’s payload and ' +
    'priority). null when there is no unique_key.',
});

/**
 * The job fields of each job a schedule enqueues, besides priority and max_attempts, as the PUT body
 * takes them: the ranges of enqueue's fields of the same names.
 */
const jobFields = {
  group: Nullable(
    Type.String({
      pattern: GROUP_NAME_PATTERN,
      ...notDotSegment,
      description: 'Of each job (flow control; as in enqueue). null: none. Not "." or "..".',
      examples: ['customer:42'],
    }),
  ),
  timeout_ms: Nullable(
    Int32({
      minimum: TIMEOUT_MS_MIN,
      maximum: TIMEOUT_MS_MAX,
      description: "Of each job: the budget of one attempt, from its claim. null: the queue's.",
    }),
  ),
  expires_in_ms: Nullable(
    Int64({
      minimum: 1,
      maximum: MAX_DELAY_MS,
      description:
        'Each job expires (dead, reason expired) this long after it is enqueued, unclaimed (at least 1: 0 ' +
        'would expire each job as it is enqueued). null: never.',
    }),
  ),
  unique_key: Nullable(
    PrintableText(
      UNIQUE_KEY_MAX,
      'Of each job: at most one waiting (scheduled or ready) job per queue and key, so an occurrence whose ' +
        'previous job still waits is folded into it (a claimed job does not count, unlike overlap skip). null: none.',
    ),
  ),
  on_conflict: Nullable(ON_CONFLICT),
};

export const ScheduleRequest = Type.Object(
  {
    queue: NewQueueName,
    cron: Type.String({
      minLength: 1,
      maxLength: 256,
      description:
        '5 fields (minute hour day-of-month month day-of-week), or 6 with seconds first; @hourly, @daily, ' +
        '@weekly, @monthly, @yearly. Day-of-month and day-of-week combine with OR, as in Vixie cron.',
      examples: ['30 2 * * *'],
    }),
    timezone: Type.Optional(
      Type.String({
        minLength: 1,
        maxLength: 64,
        default: 'UTC',
        description:
          'IANA time zone the cron is read in, spelled as the zone database spells it: Europe/Berlin, UTC, ' +
          'Etc/GMT-2, or a link such as US/Eastern. Offsets (+02:00) and other spellings (europe/berlin) are a ' +
          '400. Daylight saving: see docs/schedules.md.',
      }),
    ),
    payload: Type.Optional(Json('Given to every job (default null).')),
    priority: Type.Optional(
      Int32({ minimum: PRIORITY_MIN, maximum: PRIORITY_MAX, default: 0, description: 'Of each job.' }),
    ),
    max_attempts: Type.Optional(
      Nullable(
        Int32({
          minimum: 1,
          maximum: MAX_ATTEMPTS_LIMIT,
          description: "Of each job. null or absent: the queue's setting.",
        }),
      ),
    ),
    group: Type.Optional(jobFields.group),
    timeout_ms: Type.Optional(jobFields.timeout_ms),
    expires_in_ms: Type.Optional(jobFields.expires_in_ms),
    unique_key: Type.Optional(jobFields.unique_key),
    on_conflict: Type.Optional(jobFields.on_conflict),
    overlap: Type.Optional(OVERLAP),
    catch_up: Type.Optional(CATCH_UP),
    paused: Type.Optional(Type.Boolean({ default: false })),
  },
  {
    ...strict,
    $id: 'ScheduleRequest',
    description:
      'The whole definition: a field left out takes its default (so a PUT without paused resumes the schedule).',
    examples: [
      { queue: 'reports', cron: '30 2 * * *', timezone: 'Europe/Berlin', payload: { report: 'nightly' } },
    ],
  },
);

export const Schedule = Type.Object(
  {
    name: Type.String(),
    queue: Type.String(),
    cron: Type.String(),
    timezone: Type.String(),
    payload: Json('Given to every job.'),
    priority: Int32(),
    max_attempts: Nullable(Int32({ description: "null: the queue's setting." })),
    group: Nullable(Type.String({ description: 'Of each job; null: none.' })),
    timeout_ms: Nullable(Int32({ description: "Of each job; null: the queue's." })),
    expires_in_ms: Nullable(
      Int64({ description: 'Each job expires this long after it is enqueued; null: never.' }),
    ),
    unique_key: Nullable(Type.String({ description: 'Of each job; null: none.' })),
    on_conflict: Nullable(ON_CONFLICT),
    overlap: OVERLAP,
    catch_up: CATCH_UP,
    paused: Type.Boolean(),
    next_run_at: Nullable(Timestamp('The next occurrence the leader will enqueue; null while paused.')),
    last_run_at: Nullable(
      Timestamp(
        'The occurrence of the last job this schedule enqueued (for a trigger, when it was triggered).',
      ),
    ),
    last_job_id: Nullable(Type.String({ description: 'That job (GET /v1/jobs/{id}).' })),
    last_error: Nullable(
      Type.Object(
        { at: Timestamp(), message: Type.String() },
        {
          description:
            'Why the last occurrence could not be enqueued (the queue is gone and auto-create is off, ...).',
        },
      ),
    ),
    source: Type.Union([Type.Literal('api'), Type.Literal('file')], {
      description: 'file: declared in BATON_SCHEDULES_FILE.',
    }),
    drifted: Type.Boolean({
      description: 'From the file, and changed through the API since: the next start will not overwrite it.',
    }),
    created_at: Timestamp(),
    updated_at: Timestamp(),
  },
  { $id: 'Schedule' },
);

export const ScheduleList = PageOf('schedules', ref(Schedule), 'ScheduleList');

export const ScheduleListQuery = PageQuery(200);

export const DeletedSchedule = Type.Object(
  { name: Type.String(), deleted: Type.Literal(true) },
  { $id: 'DeletedSchedule' },
);
