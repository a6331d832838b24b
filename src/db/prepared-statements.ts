import pg from 'pg';

/**
 * Named prepared statements for the service's own queries.
 *
 * Kysely sends every query through node-postgres as an unnamed statement, so PostgreSQL parses,
 * analyses and plans the text again on every call. Baton's statements are few, fixed texts with bind
 * parameters (batch contents travel as JSON parameters), and on the one-job-per-request paths
 * parsing and planning them cost about as much PostgreSQL CPU as executing them (measured with
 * perf; docs/benchmarks.md, "What was tried and what it gave", row "Named
 * prepared statements"). Giving each distinct text a name makes node-postgres parse it once per
 * connection; PostgreSQL then reuses the parsed statement, and after five executions its plan cache may
 * settle on a generic plan.
 *
 * Only queries that carry parameters are named (BEGIN, COMMIT and DDL are not), and at most
 * MAX_NAMED distinct texts per pool, so a statement that inlined values could not grow the cache
 * without bound; past the cap, new texts go unnamed as before.
 *
 * Behind a pooler that multiplexes transactions over server connections (PgBouncer in transaction
 * mode before 1.21, or without max_prepared_statements), named statements do not survive: turn
 * this off there (BATON_DB_PREPARED_STATEMENTS=false).
 */

export const MAX_NAMED = 200;

export class StatementNames {
  private readonly names = new Map<string, string>();

  /** The name for this text, or undefined when the cap is reached and the text is new. */
  nameFor(text: string): string | undefined {
    let name = this.names.get(text);
    if (name === undefined && this.names.size < MAX_NAMED) {
      name = `baton_${this.names.size + 1}`;
      this.names.set(text, name);
    }
    return name;
  }

  get size(): number {
    return this.names.size;
  }
}

type QueryFn = (...args: unknown[]) => unknown;

/** Make this client send parameterised text queries as named prepared statements. */
export function usePreparedStatements(client: pg.PoolClient | pg.Client, names: StatementNames): void {
  const query = client.query.bind(client) as QueryFn;
  const named: QueryFn = (config, values, callback) => {
    if (typeof config === 'string' && Array.isArray(values) && values.length > 0 && callback === undefined) {
      const name = names.nameFor(config);
      if (name !== undefined) return namedQuery(query, name, config, values);
    }
    return query(config, values, callback);
  };
  (client as { query: unknown }).query = named;
}

/**
 * The query built from its text and given its name afterwards: node-postgres copies a config object
 * (`{ name, text, values }`) property by property through Object.defineProperties before using it, which
 * cost more than the rest of sending a grouped statement's Bind (docs/benchmarks.md, "What was tried
 * and what it gave", row "Named statements without node-postgres's config copy"); from text it copies
 * nothing. Answers as node-postgres's own promise does.
 */
function namedQuery(query: QueryFn, name: string, text: string, values: unknown[]): Promise<pg.QueryResult> {
  return new Promise((resolve, reject) => {
    const submittable = new pg.Query(text, values, (err: Error | undefined, result: pg.QueryResult) => {
      if (err) reject(err);
      else resolve(result);
    });
    (submittable as { name?: string }).name = name;
    query(submittable);
  });
}
