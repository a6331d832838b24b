import { Type } from 'typebox';
import { SCOPES, type Scope } from '../../auth/api-keys.js';
import { Nullable } from './common.js';

/** What GET /v1/whoami answers: the key a request presents, never its secret or digest. */
export const Whoami = Type.Object(
  {
    authenticated: Type.Boolean({
      description: 'false when the server has no API keys configured: then every request may do everything.',
    }),
    name: Nullable(Type.String({ description: 'The key’s configured name.' })),
    scopes: Type.Array(Type.Unsafe<Scope>(Type.String({ enum: [...SCOPES] })), {
      description: 'What the key may do (admin: everything).',
    }),
    queue_limited: Type.Boolean({ description: 'The key may use only the queues its patterns match.' }),
  },
  { $id: 'Whoami' },
);
