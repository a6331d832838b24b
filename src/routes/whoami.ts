import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from 'typebox';
import { SCOPES, type Scope } from '../auth/api-keys.js';
import { Nullable } from '../http/schemas/common.js';
import { errorResponses, ok } from '../http/schemas/responses.js';

const Whoami = Type.Object({
  authenticated: Type.Boolean({
    description: 'false when the server has no API keys configured: then every request may do everything.',
  }),
  name: Nullable(Type.String({ description: 'The key’s configured name.' })),
  scopes: Type.Array(Type.Unsafe<Scope>(Type.String({ enum: [...SCOPES] })), {
    description: 'What the key may do (admin: everything).',
  }),
  queue_limited: Type.Boolean({ description: 'The key may use only the queues its patterns match.' }),
});

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
        response: { 200: ok(Whoami, 'The key.'), ...errorResponses() },
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
