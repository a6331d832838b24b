import { Type } from 'typebox';
import { MAX_ATTEMPTS_LIMIT, PRIORITY_MAX, PRIORITY_MIN } from '../../jobs/limits.js';
import { SCHEDULE_NAME_PATTERN } from '../../schedules/definition.js';
import { CATCH_UP_ALL_MAX } from '../../schedules/occurrences.js';
import { Int32, Json, Nullable, PageOf, PageQuery, QueueName, strict, Timestamp } from './common.js';
import { ref } from './ref.js';

export const ScheduleParams = Type.Object(
  {
    name: Type.String({
      pattern: SCHEDULE_NAME_PATTERN,
      description: 'Schedule name: letters, digits, ".", "_" and "-", at most 128 characters.',
      examples: ['nightly-report'],
    }),
  },
  strict,
);

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

export const ScheduleRequest = Type.Object(
  {
    queue: QueueName,
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
        description: 'IANA time zone the cron is read in (Europe/Berlin). Daylight saving: see the README.',
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
