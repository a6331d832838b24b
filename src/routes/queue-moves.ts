import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { keyAllowsQueue, queuePatternsOf } from '../auth/api-keys.js';
import { ProblemError } from '../http/problem.js';
import { QueueParams } from '../http/schemas/jobs.js';
import { Move, MoveList, MoveParams, MoveRequest } from '../http/schemas/moves.js';
import { ref } from '../http/schemas/ref.js';
import { errorResponses, ok } from '../http/schemas/responses.js';
import { toMove } from '../http/views.js';

/**
 * Moves of a queue's ready jobs to other queues: a dead-letter queue's jobs back to the queues they
 * died in (what SQS's StartMessageMoveTask does), or all of a queue's ready jobs to one queue. The
 * leader does the moving in batches; these start, list and cancel (service/moves.ts).
 */
const queueMoves: FastifyPluginAsyncTypebox = async (app) => {
  const { moves } = app.service;

  app.post(
    '/v1/queues/:queue/moves',
    {
      config: { access: { scopes: ['admin'], queue: 'param' } },
      schema: {
        tags: ['queues'],
        operationId: 'startMove',
        summary: "Move a queue's ready jobs: a dead-letter queue's back to where they died",
        description:
          'Starts a move of the jobs ready in the queue now; the maintenance leader moves them in batches (at most ' +
          'max_per_second a second, if given), each job starting over (attempts 0, error history kept). Without a ' +
          'destination the queue must be a dead-letter queue (an SQS RedrivePolicy names it), and each job goes back ' +
          'to the queue it died in. One move of a queue runs at a time (409 move_running). A key limited to queue ' +
          'patterns moves jobs only into queues it may use.',
        params: QueueParams,
        body: ref(MoveRequest),
        response: {
          201: ok(ref(Move), 'The move, running.'),
          ...errorResponses(400, 404, 409, 413, 415),
        },
      },
    },
    async (request, reply) => {
      const { queue } = request.params;
      const { destination, max_per_second } = request.body;
      const key = request.apiKey;
      if (key && destination !== undefined && !keyAllowsQueue(key, destination)) {
        throw new ProblemError('forbidden', `API key "${key.name}" may not use queue "${destination}"`);
      }
      const move = await moves.start({
        source: queue,
        ...(destination !== undefined ? { destination } : {}),
        ...(max_per_second !== undefined ? { maxPerSecond: max_per_second } : {}),
        patterns: queuePatternsOf(key),
      });
      return reply.code(201).send(toMove(move));
    },
  );

  app.get(
    '/v1/queues/:queue/moves',
    {
      config: { access: { scopes: ['producer', 'consumer'], queue: 'param' } },
      schema: {
        tags: ['queues'],
        operationId: 'listMoves',
        summary: "A queue's moves, the latest first",
        description:
          'Running and finished moves of the last 14 days, at most 10; and the queues whose dead jobs come to this ' +
          'one (those the key may use), where a move without a destination sends them back.',
        params: QueueParams,
        response: { 200: ok(ref(MoveList), 'The moves.'), ...errorResponses(404) },
      },
    },
    async (request) => {
      const { queue } = request.params;
      const list = await moves.list(queue);
      return {
        moves: list.map(toMove),
        dead_letter_sources: await moves.sources(queue, queuePatternsOf(request.apiKey)),
      };
    },
  );

  app.post(
    '/v1/queues/:queue/moves/:id/cancel',
    {
      config: { access: { scopes: ['admin'], queue: 'param' } },
      schema: {
        tags: ['queues'],
        operationId: 'cancelMove',
        summary: 'Cancel a running move',
        description:
          'What it moved stays moved; the answer counts it. 409 move_finished for a move that has ended.',
        params: MoveParams,
        response: { 200: ok(ref(Move), 'The move, cancelled.'), ...errorResponses(404, 409) },
      },
    },
    async (request) => toMove(await moves.cancel(request.params.queue, request.params.id)),
  );
};

export default queueMoves;
