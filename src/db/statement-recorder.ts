import {
  type CompiledQuery,
  type DatabaseConnection,
  DummyDriver,
  Kysely,
  PostgresAdapter,
  PostgresIntrospector,
  PostgresQueryCompiler,
} from 'kysely';
import type { Db } from './database.js';
import type { Database } from './schema.js';

/**
 * The exact SQL Baton sends, taken from its own query modules at run time (never copied by hand): a
 * Kysely over a driver that runs nothing and records each compiled statement. The committed SQL files
 * (src/jobs/sql/, test/jobs/sql-files.test.ts), the plans test (test/db/plans.test.ts) and the
 * benchmarks (bench/compiled-statements.ts) read Baton's statements through it. Nothing in the server
 * uses it.
 */

/**
 * The rows a recorded statement answers (the `index`-th statement sent), so that a function whose
 * next statement depends on what the last one answered can be followed past it. None by default.
 */
export type Answer = (query: CompiledQuery, index: number) => readonly object[] | undefined;

/** A Kysely that records what it is asked to run into `seen`, answering each statement with `answer`. */
export function recorder(answer: Answer = () => []): { db: Db; seen: CompiledQuery[] } {
  const seen: CompiledQuery[] = [];
  const connection: DatabaseConnection = {
    executeQuery: async <R>(query: CompiledQuery) => {
      seen.push(query);
      return { rows: [...(answer(query, seen.length - 1) ?? [])] as R[] };
    },
    streamQuery: async function* () {},
  };
  const db = new Kysely<Database>({
    dialect: {
      createAdapter: () => new PostgresAdapter(),
      createDriver: () =>
        new (class extends DummyDriver {
          override async acquireConnection() {
            return connection;
          }
        })(),
      createIntrospector: (d) => new PostgresIntrospector(d),
      createQueryCompiler: () => new PostgresQueryCompiler(),
    },
  });
  return { db, seen };
}

/**
 * The statements a query function sends, recorded instead of run (each answered by `answer`, by
 * default with no rows). What it throws, having been answered so, is ignored.
 */
export async function recordStatements(
  run: (db: Db) => Promise<unknown>,
  answer?: Answer,
): Promise<CompiledQuery[]> {
  const { db, seen } = recorder(answer);
  await run(db).catch(() => undefined);
  return seen;
}
