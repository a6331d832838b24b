import type { CompiledQuery } from 'kysely';
import { recorder } from '../src/db/statement-recorder.js';
import { ackBriefEach } from '../src/jobs/ack.js';
import { claimStatement, claimStatementFrom } from '../src/jobs/claim/claim.js';
import type { ClaimFloor } from '../src/jobs/claim/floors.js';
import type { ClaimOptions } from '../src/jobs/claim/types.js';
import { claimFloorsQuery } from '../src/maintenance/claim-floors.js';

/**
 * The exact SQL Baton sends, taken from its own query modules at run time (never copied by hand), so
 * the raw-SQL ceiling and the EXPLAINs cannot drift from what the server runs (src/db/statement-recorder.ts).
 */

export function claimSql(opts: ClaimOptions): CompiledQuery {
  const { db } = recorder();
  return claimStatement(opts).compile(db);
}

/** The batch ack statement (src/jobs/ack.ts, ackBriefEach: what POST /v1/jobs/ack runs) for these items. */
export async function ackSql(
  items: { id: string; leaseToken: string }[],
  slots: 'own slot' | 'every slot' = 'own slot',
): Promise<CompiledQuery> {
  const { db, seen } = recorder();
  await ackBriefEach(db, items);
  // The first statement probes the items' own slot (what runs on the hot path; the slot is a literal
  // in its text). A second one looks in every slot for the items the first missed (jobs the leader
  // carried, ring.ts); the dummy driver answers no rows, so it always follows here.
  const statement = seen[slots === 'own slot' ? 0 : 1];
  if (!statement) throw new Error('expected the batch ack to run two statements');
  return statement;
}

function literal(value: unknown): string {
  if (value === null || value === undefined) return 'NULL';
  if (typeof value === 'number' || typeof value === 'bigint') return String(value);
  if (typeof value === 'boolean') return value ? 'true' : 'false';
  return `'${String(value).replaceAll("'", "''")}'`;
}

/**
 * Replace `$n` placeholders with SQL literals, or with pgbench variables (`:name`) for the
 * positions listed in `variables`. pgbench sends `:name` as a bind parameter in extended mode, as
 * node-postgres does for Baton.
 */
export function inlineParameters(query: CompiledQuery, variables: Record<number, string> = {}): string {
  return query.sql.replace(/\$(\d+)/g, (_, n: string) => {
    const index = Number(n);
    const variable = variables[index];
    return variable !== undefined ? `:${variable}` : literal(query.parameters[index - 1]);
  });
}

/** The plain claim from a claim floor (src/jobs/claim/plain.ts, plainPickFrom), as the server sends it. */
export function claimFromFloorSql(opts: ClaimOptions, floor: ClaimFloor): CompiledQuery {
  const { db } = recorder();
  return claimStatementFrom(opts, floor).compile(db);
}

/** The leader's walk that finds each queue's claim floor (src/maintenance/claim-floors.ts). */
export function claimFloorsSql(): CompiledQuery {
  const { db } = recorder();
  return claimFloorsQuery().compile(db);
}
