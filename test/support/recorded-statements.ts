import {
  type CompiledQuery,
  DummyDriver,
  Kysely,
  PostgresAdapter,
  PostgresIntrospector,
  PostgresQueryCompiler,
} from 'kysely';
import type { Db } from '../../src/db/database.js';

/**
 * The exact SQL Baton sends, taken from its own query modules at run time (never copied by hand): a
 * Kysely instance over a driver that executes nothing records each compiled statement, and every
 * statement answers no rows. test/db/plans.test.ts EXPLAINs what it records; the bench's raw-SQL
 * ceiling and claim-cost scenario (bench/compiled-statements.ts) run it.
 */
export function statementRecorder(): { db: Db; seen: CompiledQuery[] } {
  const seen: CompiledQuery[] = [];
  const db = new Kysely<any>({
    dialect: {
      createAdapter: () => new PostgresAdapter(),
      createDriver: () => new DummyDriver(),
      createIntrospector: (d) => new PostgresIntrospector(d),
      createQueryCompiler: () => new PostgresQueryCompiler(),
    },
    log: (event) => {
      seen.push(event.query);
    },
  });
  return { db: db as Db, seen };
}

/** The statements a query function sends, recorded instead of run (a failure after them is ignored). */
export async function recordStatements(run: (db: Db) => Promise<unknown>): Promise<CompiledQuery[]> {
  const { db, seen } = statementRecorder();
  await run(db).catch(() => undefined);
  return seen;
}
