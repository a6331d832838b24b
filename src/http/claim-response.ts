import type { FastifyReply } from 'fastify';
import type { ClaimedRow } from '../jobs/claim.js';
import { traceOf } from '../jobs/trace-context.js';

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
  let out = '{"jobs":[';
  for (let i = 0; i < rows.length; i++) {
    if (i > 0) out += ',';
    out += claimedJobJson(rows[i]!);
  }
  return `${out}]}`;
}

/** One ClaimedJob. Strings a client wrote (queue, group, trace context) are escaped by JSON.stringify. */
function claimedJobJson(r: ClaimedRow): string {
  const trace = r.meta === null || r.meta === undefined ? undefined : traceOf(r.meta);
  return (
    `{"id":${JSON.stringify(r.id)},"queue":${JSON.stringify(r.queue)},` +
    `"group":${r.group_key === '' ? 'null' : JSON.stringify(r.group_key)},` +
    `"payload":${r.payload_json ?? 'null'},"priority":${r.priority},"attempt":${r.attempts},` +
    `"max_attempts":${r.max_attempts},"lease_token":${JSON.stringify(r.lease_token)},` +
    `"lease_expires_at":"${r.lease_expires_at.toISOString()}",` +
    `"deadline_at":${r.deadline_at === null ? 'null' : `"${r.deadline_at.toISOString()}"`},` +
    `"run_at":"${r.run_at.toISOString()}",` +
    `"created_at":"${r.created_at.toISOString()}",` +
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
