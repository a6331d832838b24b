import { Type } from 'typebox';
import { PUSH_CONCURRENCY_MAX, PUSH_TIMEOUT_MS_MAX, PUSH_TIMEOUT_MS_MIN } from '../../jobs/limits.js';
import { Int32, Int64, Nullable, strict, Timestamp } from './common.js';

/** Push queues: Baton POSTs each job to an endpoint (docs/push.md, service/push.ts). */

export const PushRequest = Type.Object(
  {
    url: Type.String({
      maxLength: 2048,
      description:
        'Where each job is POSTed: http or https, no user name or password, allowed by BATON_PUSH_ALLOW ' +
        '(private and loopback addresses are refused unless it names them).',
      examples: ['https://example.com/jobs/email'],
    }),
    timeout_ms: Type.Optional(
      Int32({
        minimum: PUSH_TIMEOUT_MS_MIN,
        maximum: PUSH_TIMEOUT_MS_MAX,
        default: 30_000,
        description:
          'How long a delivery may take to be answered; past it, the attempt fails (and the endpoint backs off).',
      }),
    ),
    concurrency: Type.Optional(
      Int32({
        minimum: 1,
        maximum: PUSH_CONCURRENCY_MAX,
        default: 10,
        description:
          "Deliveries in flight at once from each replica, at most (narrowed while the endpoint throttles). The queue's " +
          'concurrency_limit caps them across replicas.',
      }),
    ),
  },
  { ...strict, $id: 'PushRequest' },
);

export const RotateSecretRequest = Type.Object(
  {
    overlap_ms: Type.Optional(
      Int64({
        minimum: 0,
        maximum: 7 * 86_400_000,
        default: 86_400_000,
        description:
          'How long the previous secret keeps signing beside the new one (both in Baton-Signature).',
      }),
    ),
  },
  { ...strict, $id: 'RotateSecretRequest' },
);

export const PushEndpoint = Type.Object(
  {
    queue: Type.String(),
    url: Type.String(),
    timeout_ms: Int32(),
    concurrency: Int32(),
    secret: Type.Optional(
      Type.String({
        description:
          'The signing secret: only in the answer that made it (a new push queue, a rotation). No read shows it again.',
      }),
    ),
    secret_created_at: Timestamp('When the current secret was made.'),
    previous_secret_until: Nullable(
      Timestamp('While a rotation overlaps: until when the previous secret signs too (null: no overlap).'),
    ),
    created_at: Timestamp('When the queue became a push queue.'),
    updated_at: Timestamp('When its endpoint last changed.'),
  },
  {
    $id: 'PushEndpoint',
    description: "A push queue's endpoint. Its secrets are never shown after they are made.",
  },
);

export const PushRemoved = Type.Object(
  { queue: Type.String(), push: Type.Literal(false) },
  { $id: 'PushRemoved', description: 'Push is off: the queue waits for workers again.' },
);
