import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { invalidField } from '../errors.js';
import { decodeCursor, encodeCursor } from '../http/cursor.js';
import {
  DeletedGroup,
  Group,
  GroupConfigRequest,
  GroupList,
  GroupListQuery,
  GroupParams,
  NewGroupParams,
} from '../http/schemas/groups.js';
import { QueueParams } from '../http/schemas/jobs.js';
import { ref } from '../http/schemas/ref.js';
import { errorResponses, ok } from '../http/schemas/responses.js';
import { toGroup } from '../http/views.js';
import { isGroupName } from '../jobs/limits.js';
import type { GroupChanges, GroupListKey } from '../queues/group-store.js';

/** A queue's groups (flow control): list them busiest first, read one, override its limits, reset it. */

const badCursor = () => invalidField('cursor', 'is not a cursor this server issued');

/** A groups-list cursor's key: [ready + claimed, group name ('' for the jobs without a group)]. */
function parseGroupKey(key: string[] | undefined): GroupListKey {
  if (key?.length !== 2) throw badCursor();
  const [load, group] = key as [string, string];
  if (!/^(0|[1-9][0-9]{0,17})$/.test(load) || (group !== '' && !isGroupName(group))) throw badCursor();
  return [load, group];
}

const queueGroups: FastifyPluginAsyncTypebox = async (app) => {
  const { queues } = app.service;
  const view = async (queue: string, group: string) => {
    const found = await queues.group(queue, group);
    return toGroup(found.queue, found.group, found.countedAt);
  };

  app.get(
    '/v1/queues/:queue/groups',
    {
      config: { access: { scopes: ['producer', 'consumer'], queue: 'param' } },
      schema: {
        tags: ['groups'],
        operationId: 'listGroups',
        summary: "List a queue's groups, busiest first",
        description:
          'Groups with ready, claimed or scheduled jobs, and groups with overrides, ordered by ready + claimed ' +
          'jobs (most first), then by name. Counts are kept by the maintenance leader (every few seconds), not ' +
          'counted per request; a group whose counts change between pages may appear on two pages or none.',
        params: QueueParams,
        querystring: GroupListQuery,
        response: { 200: ok(ref(GroupList), 'A page of groups.'), ...errorResponses(400, 404) },
      },
    },
    async (request) => {
      const { queue } = request.params;
      const { cursor } = request.query;
      const after = cursor === undefined ? undefined : parseGroupKey(decodeCursor(cursor));
      const { queue: row, page, countedAt } = await queues.groups(queue, request.query.limit ?? 100, after);
      return {
        groups: page.rows.map((g) => toGroup(row, g, countedAt)),
        next_cursor: page.next ? encodeCursor(page.next) : null,
      };
    },
  );

  app.get(
    '/v1/queues/:queue/groups/:group',
    {
      config: { access: { scopes: ['producer', 'consumer'], queue: 'param' } },
      schema: {
        tags: ['groups'],
        operationId: 'getGroup',
        summary: 'A group: its counts and the limits in effect',
        description: 'Any group name answers: a group never seen has no jobs and follows the queue defaults.',
        params: GroupParams,
        response: { 200: ok(ref(Group), 'The group.'), ...errorResponses(404) },
      },
    },
    async (request) => view(request.params.queue, request.params.group),
  );

  app.put(
    '/v1/queues/:queue/groups/:group',
    {
      config: { access: { scopes: ['admin'], queue: 'param' } },
      schema: {
        tags: ['groups'],
        operationId: 'putGroup',
        summary: "Override a group's limits, weight or pause",
        description:
          "Fields you give are set; fields you leave out keep their value; null resets a field to the queue's " +
          'group default. Applies from the next claim, on every replica. The queue must exist; it becomes ' +
          'explicitly managed (never collected by the leader).',
        params: NewGroupParams,
        body: ref(GroupConfigRequest),
        response: { 200: ok(ref(Group), 'The group.'), ...errorResponses(400, 404, 413, 415) },
      },
    },
    async (request) => {
      const { queue, group } = request.params;
      const body = request.body;
      const changes: GroupChanges = {
        concurrency_limit: body.concurrency_limit,
        rate_limit: body.rate_limit === undefined ? undefined : (body.rate_limit?.limit ?? null),
        rate_period_ms: body.rate_limit === undefined ? undefined : (body.rate_limit?.period_ms ?? null),
        weight: body.weight,
        paused: body.paused,
      };
      for (const key of Object.keys(changes) as (keyof GroupChanges)[]) {
        if (changes[key] === undefined) delete changes[key];
      }
      await app.service.queues.putGroup(queue, group, changes);
      return view(queue, group);
    },
  );

  app.delete(
    '/v1/queues/:queue/groups/:group',
    {
      config: { access: { scopes: ['admin'], queue: 'param' } },
      schema: {
        tags: ['groups'],
        operationId: 'deleteGroup',
        summary: "Reset a group to the queue's defaults",
        description: 'Drops the group’s overrides (limits, weight, pause). Its jobs are untouched.',
        params: GroupParams,
        response: { 200: ok(ref(DeletedGroup), 'The group, reset.'), ...errorResponses(404) },
      },
    },
    async (request) => {
      const { queue, group } = request.params;
      const reset = await app.service.queues.resetGroup(queue, group);
      return { queue, group, reset };
    },
  );
};

export default queueGroups;
