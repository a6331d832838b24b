import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { SCOPES } from '../auth/api-keys.js';
import { Whoami } from '../http/schemas/keys.js';
import { ref } from '../http/schemas/ref.js';
import { errorResponses, ok } from '../http/schemas/responses.js';

/**
 * GET /v1/whoami: the key a request presents, as the server sees it (never its secret or digest).
 * The dashboard asks it once at login, to check the key and to show actions only to admin keys.
 */
const whoami: FastifyPluginAsyncTypebox = async (app) => {
  app.get(
    '/v1/whoami',
    {
      config: { access: { scopes: ['producer', 'consumer'] } },
      schema: {
        tags: ['operations'],
        operationId: 'whoami',
        summary: 'The API key in use: its name and scopes',
        description: 'Any valid key may ask. A way to check a key before using it.',
        response: { 200: ok(ref(Whoami), 'The key.'), ...errorResponses() },
      },
    },
    async (request) => {
      const key = request.apiKey;
      if (!key) return { authenticated: false, name: null, scopes: [...SCOPES], queue_limited: false };
      return {
        authenticated: true,
        name: key.name,
        scopes: SCOPES.filter((s) => key.scopes.has(s)),
        queue_limited: key.queues !== undefined,
      };
    },
  );
};

export default whoami;
