import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { queuePatternsOf } from '../auth/api-keys.js';
import { invalidField } from '../errors.js';
import { decodeCursor, encodeCursor } from '../http/cursor.js';
import { jsonText } from '../http/json-input.js';
import { EnqueuedJob } from '../http/schemas/jobs.js';
import { ref } from '../http/schemas/ref.js';
import { errorResponses, ok } from '../http/schemas/responses.js';
import {
  DeletedSchedule,
  NewScheduleParams,
  Schedule,
  ScheduleList,
  ScheduleListQuery,
  ScheduleParams,
  ScheduleRequest,
} from '../http/schemas/schedules.js';
import { toEnqueuedJob, toSchedule } from '../http/views.js';
import { DEFAULTS, isScheduleName, jobFieldsOf, type ScheduleDefinition } from '../schedules/definition.js';

/** Cron schedules, /v1/schedules/...: define, read, list, pause, resume, trigger, delete. */

const badCursor = () => invalidField('cursor', 'is not a cursor this server issued');

const schedules: FastifyPluginAsyncTypebox = async (app) => {
  const { config } = app;
  const { schedules } = app.service;

  app.put(
    '/v1/schedules/:name',
    {
      config: { access: { scopes: ['admin'], queue: 'schedule' } },
      schema: {
        tags: ['schedules'],
        operationId: 'putSchedule',
        summary: 'Create or replace a cron schedule',
        description:
          'Creates the schedule (201) or replaces its definition (200). The leader enqueues a job into `queue` at ' +
          'every occurrence of `cron` in `timezone`, exactly once, with `payload`, `priority`, `max_attempts`, ' +
          '`group`, `timeout_ms`, `expires_in_ms` and `unique_key` (the enqueue fields of the same names). ' +
          'A bad cron, a time zone not spelled as the IANA zone database spells it, a cron that never fires ' +
          '(30 February) or one that fires more often than the server allows (BATON_SCHEDULE_MIN_INTERVAL_MS) is a ' +
          '400 naming the field. Creating one beyond the server’s cap (BATON_MAX_SCHEDULES), or beyond a queue-limited ' +
          'key’s own (BATON_MAX_SCHEDULES_PER_KEY), is a 409 schedule_limit_reached; replacing one never is.',
        params: NewScheduleParams,
        body: ref(ScheduleRequest),
        response: {
          200: ok(ref(Schedule), 'Replaced.'),
          201: ok(ref(Schedule), 'Created.'),
          ...errorResponses(400, 404, 409, 413, 415),
        },
      },
    },
    async (request, reply) => {
      const { name } = request.params;
      const b = request.body;
      const def: ScheduleDefinition = {
        queue: b.queue,
        cron: b.cron,
        timezone: b.timezone ?? DEFAULTS.timezone,
        payloadJson: jsonText(b.payload ?? null, 'payload', config.payloadLimitBytes),
        priority: b.priority ?? DEFAULTS.priority,
        maxAttempts: b.max_attempts ?? null,
        ...jobFieldsOf(b, (field, message) => {
          throw invalidField(field, message);
        }),
        overlap: b.overlap ?? DEFAULTS.overlap,
        catchUp: b.catch_up ?? DEFAULTS.catchUp,
        paused: b.paused ?? DEFAULTS.paused,
      };
      const { created, schedule } = await schedules.put(name, def, queuePatternsOf(request.apiKey));
      return reply.code(created ? 201 : 200).send(toSchedule(schedule));
    },
  );

  app.get(
    '/v1/schedules',
    {
      config: { access: { scopes: ['producer', 'consumer'] } },
      schema: {
        tags: ['schedules'],
        operationId: 'listSchedules',
        summary: 'List cron schedules',
        description:
          'In name order, a page at a time (limit up to 500; pass next_cursor as cursor). A key limited to queue ' +
          'patterns sees only the schedules of its queues.',
        querystring: ScheduleListQuery,
        response: {
          200: ok(ref(ScheduleList), 'A page of schedules.'),
          ...errorResponses(400),
        },
      },
    },
    async (request) => {
      const limit = request.query.limit ?? 100;
      let after: string | undefined;
      if (request.query.cursor !== undefined) {
        after = decodeCursor(request.query.cursor)?.[0];
        if (after === undefined || !isScheduleName(after)) throw badCursor();
      }
      const rows = await schedules.list(limit, after, queuePatternsOf(request.apiKey));
      const last = rows.at(-1);
      return {
        schedules: rows.map(toSchedule),
        next_cursor: rows.length === limit && last ? encodeCursor([last.name]) : null,
      };
    },
  );

  app.get(
    '/v1/schedules/:name',
    {
      config: { access: { scopes: ['producer', 'consumer'], queue: 'schedule' } },
      schema: {
        tags: ['schedules'],
        operationId: 'getSchedule',
        summary: 'A cron schedule, with its next and last run',
        params: ScheduleParams,
        response: { 200: ok(ref(Schedule), 'The schedule.'), ...errorResponses(404) },
      },
    },
    async (request) => toSchedule(await schedules.get(request.params.name, queuePatternsOf(request.apiKey))),
  );

  app.delete(
    '/v1/schedules/:name',
    {
      config: { access: { scopes: ['admin'], queue: 'schedule' } },
      schema: {
        tags: ['schedules'],
        operationId: 'deleteSchedule',
        summary: 'Delete a cron schedule',
        description:
          'No further occurrences; jobs it already enqueued are untouched. A schedule from BATON_SCHEDULES_FILE ' +
          'comes back at the next start while the file still declares it.',
        params: ScheduleParams,
        response: { 200: ok(ref(DeletedSchedule), 'Deleted.'), ...errorResponses(404) },
      },
    },
    async (request) => {
      const { name } = request.params;
      await schedules.delete(name, queuePatternsOf(request.apiKey));
      return { name, deleted: true as const };
    },
  );

  for (const [action, paused] of [
    ['pause', true],
    ['resume', false],
  ] as const) {
    app.post(
      `/v1/schedules/:name/${action}`,
      {
        config: { access: { scopes: ['admin'], queue: 'schedule' } },
        schema: {
          tags: ['schedules'],
          operationId: `${action}Schedule`,
          summary: paused ? 'Pause a cron schedule' : 'Resume a paused cron schedule',
          description: paused
            ? 'No occurrences are enqueued while paused.'
            : 'It runs again from its next occurrence after now; the time it was paused is not caught up.',
          params: ScheduleParams,
          response: { 200: ok(ref(Schedule), 'The schedule.'), ...errorResponses(404) },
        },
      },
      async (request) => {
        return toSchedule(
          await schedules.setPaused(request.params.name, paused, queuePatternsOf(request.apiKey)),
        );
      },
    );
  }

  app.post(
    '/v1/schedules/:name/trigger',
    {
      config: { access: { scopes: ['admin'], queue: 'schedule' } },
      schema: {
        tags: ['schedules'],
        operationId: 'triggerSchedule',
        summary: 'Run a cron schedule now, once',
        description:
          'Enqueues one job as an occurrence would, now, even while the schedule is paused and whatever its overlap ' +
          'rule; it becomes the schedule’s last job. Its occurrences go on as before. With a unique_key held by a ' +
          'waiting job, that job is answered with 200 instead (with on_conflict replace, after taking this run).',
        params: ScheduleParams,
        response: {
          200: ok(ref(EnqueuedJob), 'The waiting job holding the unique_key.'),
          201: ok(ref(EnqueuedJob), 'The job.'),
          ...errorResponses(404, 409),
        },
      },
    },
    async (request, reply) => {
      const { job, created } = await schedules.trigger(request.params.name, queuePatternsOf(request.apiKey));
      return reply.code(created ? 201 : 200).send(toEnqueuedJob(job));
    },
  );
};

export default schedules;
