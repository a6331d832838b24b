import type { FastifyReply } from 'fastify';
import type { ClaimedRow } from '../jobs/claim/types.js';
import { traceOf } from '../jobs/trace-context.js';
import { isoTime } from './iso-time.js';

/**
 * The claim's answer (schema ClaimResponse, one ClaimedJob per row) written as JSON text by hand,
 * with each job's payload spliced in as PostgreSQL printed it. A claim of 100 jobs was the server's
 * costliest answer per job: every payload parsed from the row, copied into a view object, then
 * serialised again from the response schema. Here the only work per job is string concatenation.
 *
 * The fields and their order are ClaimedJob's (src/http/schemas/jobs.ts); test/http/claim-response
 * checks the text parses to exactly what the schema serialiser makes of toClaimedJob() for the same
 * rows, and validates against the schema.
 */
export function claimResponseJson(rows: readonly ClaimedRow[]): string {
  return `{"jobs":[${claimedJobsJson(rows)}]}`;
}

/** ClaimedJobs, comma-separated (the inside of a JSON array). */
function claimedJobsJson(rows: readonly ClaimedRow[]): string {
  let out = '';
  for (let i = 0; i < rows.length; i++) {
    if (i > 0) out += ',';
    out += claimedJobJson(rows[i]!);
  }
  return out;
}

const EMPTY_NEXT = '"next":[]}';

/**
 * An answer with `next` (ack-and-claim: JobAndNext, BatchAckResponse) with the claimed jobs written
 * as the claim writes them: the rest of the answer goes through the route's schema serialiser with
 * `next: []` (its last property), and the jobs are spliced into that empty list. So the next jobs'
 * payloads are never parsed and serialised again, as in the claim's own answer.
 */
export function withNextJson(answerWithEmptyNext: string, rows: readonly ClaimedRow[]): string {
  if (!answerWithEmptyNext.endsWith(EMPTY_NEXT)) {
    throw new Error('ack-and-claim: the serialised answer does not end with an empty next');
  }
  if (rows.length === 0) return answerWithEmptyNext;
  return `${answerWithEmptyNext.slice(0, -2)}${claimedJobsJson(rows)}]}`;
}

/** One ClaimedJob. Strings a client wrote (queue, group, trace context) are escaped by JSON.stringify. */
function claimedJobJson(r: ClaimedRow): string {
  const trace = r.meta === null || r.meta === undefined ? undefined : traceOf(r.meta);
  return (
    // The id (bigint digits) and the lease token (a uuid) as PostgreSQL printed them need no escaping.
    `{"id":"${r.id}","queue":${JSON.stringify(r.queue)},` +
    `"group":${r.group_key === '' ? 'null' : JSON.stringify(r.group_key)},` +
    `"payload":${r.payload_json ?? 'null'},"priority":${r.priority},"attempt":${r.attempts},` +
    `"max_attempts":${r.max_attempts},"lease_token":"${r.lease_token}",` +
    `"lease_expires_at":"${isoTime(r.lease_expires_at)}",` +
    `"deadline_at":${r.deadline_at === null ? 'null' : `"${isoTime(r.deadline_at)}"`},` +
    `"run_at":"${isoTime(r.run_at)}",` +
    `"created_at":"${isoTime(r.created_at)}",` +
    `"traceparent":${trace?.traceparent === undefined ? 'null' : JSON.stringify(trace.traceparent)},` +
    `"tracestate":${typeof trace?.tracestate === 'string' ? JSON.stringify(trace.tracestate) : 'null'}}`
  );
}

/**
 * Send JSON text already written (Fastify passes a string with a JSON content type through as it
 * is, skipping the schema serialiser).
 */
export function sendJsonText(reply: FastifyReply, json: string): FastifyReply {
  return reply.type('application/json; charset=utf-8').send(json);
}
