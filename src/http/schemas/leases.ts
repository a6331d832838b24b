import { Type } from 'typebox';
import {
  ERROR_MESSAGE_MAX,
  LEASE_MS_MAX,
  LEASE_MS_MIN,
  MAX_BATCH,
  MAX_DELAY_MS,
  PROGRESS_MAX_BYTES,
} from '../../jobs/limits.js';
import { Int32, Int64, JobId, Json, LeaseToken, strict, Timestamp } from './common.js';
import { ClaimedJob, ClaimRequest, Job } from './jobs.js';
import { ref } from './ref.js';

/** Schemas of what the holder of a lease sends and gets back: renew, ack and nack, one or many. */

/**
 * Ack-and-claim: `next` on an ack, a nack or a batch ack claims the next jobs of the same queue in
 * the same request, with the claim request's fields, bounds and defaults.
 */
// (A description beside the $ref would be dropped from the document: the routes' descriptions say it.)
const next = Type.Optional(ref(ClaimRequest));

/** The jobs ack-and-claim claimed; present only when the request gave `next`. */
const nextJobs = Type.Optional(
  Type.Array(ref(ClaimedJob), {
    description:
      'Only when the request gave `next`: the jobs claimed after the ack, under fresh leases. Empty when ' +
      'none was ready within next.wait_ms, when an item of a batch lost its lease, or when the claim ' +
      'failed; the ack stands either way.',
  }),
);

const EXAMPLE_TOKEN = '3f0e9a52-6a43-4a0c-9d4e-52d1b6e0c001';

const leaseMs = Int32({
  minimum: LEASE_MS_MIN,
  maximum: LEASE_MS_MAX,
  description: 'New lease length from now. Default: the length the claim (or the last renew) used.',
});

/** `progress` on a lease write: one rule (size, validation, null) for renew, ack and nack. */
const progressOf = (kept: string) =>
  Type.Optional(
    Json(
      `The worker's progress, any JSON up to ${PROGRESS_MAX_BYTES} bytes (else 413 naming the field): ${kept} ` +
        'and shown by GET /v1/jobs/{id}, the job list and the dashboard; null clears it; left out, the job ' +
        'keeps what it has (what the last renewal reported).',
    ),
  );
const progress = progressOf('kept on the job (latest wins)');
const finalProgress = progressOf('how far the job got, kept on the completed job');

export const RenewRequest = Type.Object(
  { lease_token: LeaseToken, lease_ms: Type.Optional(leaseMs), progress },
  { ...strict, $id: 'RenewRequest', examples: [{ lease_token: EXAMPLE_TOKEN, lease_ms: 60000 }] },
);
export const RenewResponse = Type.Object(
  { id: Type.String(), lease_expires_at: Timestamp('The new expiry.'), lease_ms: Int32() },
  { $id: 'RenewResponse' },
);

export const BatchRenewItem = Type.Object(
  { id: JobId, lease_token: LeaseToken, lease_ms: Type.Optional(leaseMs), progress },
  { ...strict, $id: 'BatchRenewItem' },
);
export const BatchRenewRequest = Type.Object(
  { renewals: Type.Array(ref(BatchRenewItem), { minItems: 1, maxItems: MAX_BATCH }) },
  {
    ...strict,
    $id: 'BatchRenewRequest',
    examples: [{ renewals: [{ id: '42', lease_token: EXAMPLE_TOKEN, lease_ms: 60000 }] }],
  },
);
export const RenewOutcome = Type.Unsafe<'renewed' | 'lease_lost' | 'not_found' | 'deadline_exceeded'>(
  Type.String({
    $id: 'RenewOutcome',
    enum: ['renewed', 'lease_lost', 'not_found', 'deadline_exceeded'],
    description: "deadline_exceeded: the attempt's budget (timeout_ms) has run out; it cannot be renewed.",
  }),
);
export const BatchRenewResult = Type.Object(
  {
    id: Type.String(),
    outcome: ref(RenewOutcome),
    lease_expires_at: Type.Optional(Timestamp('The new expiry (renewed leases only).')),
    lease_ms: Type.Optional(Int32()),
  },
  { $id: 'BatchRenewResult' },
);
export const BatchRenewResponse = Type.Object(
  {
    results: Type.Array(ref(BatchRenewResult), { description: 'One per renewal, in request order.' }),
    renewed: Int32(),
    failed: Int32(),
  },
  { $id: 'BatchRenewResponse' },
);

export const AckRequest = Type.Object(
  {
    lease_token: LeaseToken,
    result: Type.Optional(Json('Stored and shown on the job.')),
    progress: finalProgress,
    next,
  },
  { ...strict, $id: 'AckRequest', examples: [{ lease_token: EXAMPLE_TOKEN, result: { sent: true } }] },
);

export const BatchAckItem = Type.Object(
  {
    id: JobId,
    lease_token: LeaseToken,
    result: Type.Optional(Json('Stored and shown on the job.')),
    progress: finalProgress,
  },
  { ...strict, $id: 'BatchAckItem' },
);
export const BatchAckRequest = Type.Object(
  { acks: Type.Array(ref(BatchAckItem), { minItems: 1, maxItems: MAX_BATCH }), next },
  { ...strict, $id: 'BatchAckRequest', examples: [{ acks: [{ id: '42', lease_token: EXAMPLE_TOKEN }] }] },
);
export const AckOutcome = Type.Unsafe<'acked' | 'lease_lost' | 'not_found'>(
  Type.String({ $id: 'AckOutcome', enum: ['acked', 'lease_lost', 'not_found'] }),
);
export const BatchAckResult = Type.Object(
  { id: Type.String(), outcome: ref(AckOutcome) },
  { $id: 'BatchAckResult' },
);
export const BatchAckResponse = Type.Object(
  {
    results: Type.Array(ref(BatchAckResult), { description: 'One per ack, in request order.' }),
    acked: Int32(),
    failed: Int32(),
    next: nextJobs,
  },
  { $id: 'BatchAckResponse' },
);

export const WorkerError = Type.Object(
  {
    message: Type.String({ maxLength: ERROR_MESSAGE_MAX }),
    details: Type.Optional(Json('Anything that helps: a stack trace, a status code...')),
  },
  { ...strict, $id: 'WorkerError', description: 'What went wrong, as the worker tells it.' },
);

export const NackRequest = Type.Object(
  {
    lease_token: LeaseToken,
    error: Type.Optional(ref(WorkerError)),
    retry_in_ms: Type.Optional(
      Int64({
        minimum: 0,
        maximum: MAX_DELAY_MS,
        description: "Retry after this long instead of the queue's backoff.",
      }),
    ),
    dead: Type.Optional(
      Type.Boolean({ description: 'Give up now: the job goes to dead whatever its attempts.' }),
    ),
    give_back: Type.Optional(
      Type.Boolean({
        description:
          'Give the job back unfinished (a worker shutting down): it is ready again at once, in its old ' +
          'place in claim order, and this attempt is not counted (attempts goes back down, so a job on its ' +
          'last attempt is not sent to dead) and records no error. Cannot be combined with `error`, ' +
          '`retry_in_ms` or `dead: true` (400 naming the field).',
      }),
    ),
    progress: progressOf('how far this attempt got, kept on the job wherever it goes (retry or dead)'),
    next,
  },
  {
    ...strict,
    $id: 'NackRequest',
    examples: [
      {
        lease_token: EXAMPLE_TOKEN,
        error: { message: 'SMTP timeout', details: { code: 421 } },
        retry_in_ms: 60000,
      },
    ],
  },
);

/** A job as an ack or nack answers it, with the jobs claimed by `next` when the request gave it. */
export const JobAndNext = Type.Intersect([ref(Job), Type.Object({ next: nextJobs })], {
  $id: 'JobAndNext',
});
