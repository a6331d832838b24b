import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { QueueParams } from '../http/schemas/jobs.js';
import { PushEndpoint, PushRemoved, PushRequest, RotateSecretRequest } from '../http/schemas/push.js';
import { ref } from '../http/schemas/ref.js';
import { errorResponses, ok } from '../http/schemas/responses.js';
import { toPushEndpoint } from '../http/views.js';

/**
 * Push queues (docs/push.md): make a queue one whose jobs Baton POSTs to an endpoint, read its
 * endpoint, rotate its signing secret, turn push off. The delivering is push/dispatcher.ts's.
 */
const queuePush: FastifyPluginAsyncTypebox = async (app) => {
  const { push } = app.service;
  const access = { access: { scopes: ['admin' as const], queue: 'param' as const } };

  app.put(
    '/v1/queues/:queue/push',
    {
      config: access,
      schema: {
        tags: ['push'],
        operationId: 'setPush',
        summary: 'Make a queue a push queue, or change its endpoint',
        description:
          "From now on every replica claims the queue's jobs under a lease and POSTs each to `url`, signed (the " +
          'Baton-Signature header; docs/push.md says how to check it), and acks or nacks it by the answer: 2xx acks ' +
          '(a JSON body is the result), 202 leaves the lease with the endpoint (it renews and acks through the API ' +
          'with the Baton-Lease-Token it was given), 410 or `Baton-Dead: true` sends it to dead, 429 and 503 back ' +
          "off (Retry-After honoured), anything else, a timeout or a failed connection retries with the queue's " +
          'backoff. Creates the queue if need be. The first answer (201) carries the signing secret; it is never ' +
          'shown again (rotate for a new one).',
        params: QueueParams,
        body: ref(PushRequest),
        response: {
          200: ok(ref(PushEndpoint), 'The endpoint changed (its secret stays as it was).'),
          201: ok(ref(PushEndpoint), 'The queue is a push queue now; `secret` is in this answer only.'),
          ...errorResponses(400, 413, 415),
        },
      },
    },
    async (request, reply) => {
      const { url, timeout_ms = 30_000, concurrency = 10 } = request.body;
      const set = await push.set(request.params.queue, { url, timeoutMs: timeout_ms, concurrency });
      return reply.code(set.created ? 201 : 200).send(toPushEndpoint(set.row, set.secret));
    },
  );

  app.get(
    '/v1/queues/:queue/push',
    {
      config: access,
      schema: {
        tags: ['push'],
        operationId: 'getPush',
        summary: "A push queue's endpoint",
        description: 'Its URL, timeout and concurrency, and when its secret was made; never the secret.',
        params: QueueParams,
        response: { 200: ok(ref(PushEndpoint), 'The endpoint.'), ...errorResponses(404) },
      },
    },
    async (request) => toPushEndpoint(await push.read(request.params.queue)),
  );

  app.post(
    '/v1/queues/:queue/push/rotate-secret',
    {
      config: access,
      schema: {
        tags: ['push'],
        operationId: 'rotatePushSecret',
        summary: 'A new signing secret for a push queue',
        description:
          'Answers the new secret (only here). For `overlap_ms` (a day by default) the previous one signs too: each ' +
          'delivery carries a v1 signature by each, so receivers can move to the new secret one by one.',
        params: QueueParams,
        body: ref(RotateSecretRequest),
        response: {
          200: ok(ref(PushEndpoint), 'The endpoint, with its new secret.'),
          ...errorResponses(404, 415),
        },
      },
    },
    async (request) => {
      const rotated = await push.rotate(request.params.queue, request.body.overlap_ms ?? 86_400_000);
      return toPushEndpoint(rotated.row, rotated.secret);
    },
  );

  app.delete(
    '/v1/queues/:queue/push',
    {
      config: access,
      schema: {
        tags: ['push'],
        operationId: 'deletePush',
        summary: 'Stop pushing a queue',
        description:
          'Its jobs wait for workers to claim them again. Deliveries in flight finish and are settled as usual.',
        params: QueueParams,
        response: {
          200: ok(ref(PushRemoved), 'Push is off.'),
          ...errorResponses(404),
        },
      },
    },
    async (request) => {
      await push.remove(request.params.queue);
      return { queue: request.params.queue, push: false as const };
    },
  );
};

export default queuePush;
