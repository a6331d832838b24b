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
 * The statements a query function sends, compiled by Kysely and recorded instead of run (a driver
 * that executes nothing answers every statement with no rows). Used to EXPLAIN Baton's own SQL,
 * taken from its query modules at run time rather than copied by hand.
 */
export async function recordStatements(run: (db: Db) => Promise<unknown>): Promise<CompiledQuery[]> {
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
  await run(db as Db).catch(() => undefined);
  return seen;
}
