import { sql } from 'kysely';
import { describe, expect, it } from 'vitest';
import { StatementShapes } from '../../src/db/statement-shapes.js';
import { useTestDatabase } from '../support/database.js';

/**
 * Hot statements are compiled once per shape and then run with fresh values (src/db/statement-shapes.ts):
 * each call must get its own values, in every place the statement uses them, and a value that would
 * end up in the text (frozen into every later call) must be refused.
 */
const database = useTestDatabase();

describe('statement shapes', () => {
  it('runs each call with its own values, a value used twice in both places', async () => {
    const shapes = new StatementShapes((shape: 'sum' | 'difference', a: number, b: number) =>
      shape === 'sum'
        ? sql<{ r: number; a: number }>`SELECT ${a}::int + ${b}::int AS r, ${a}::int AS a`
        : sql<{ r: number; a: number }>`SELECT ${a}::int - ${b}::int AS r, ${a}::int AS a`,
    );
    for (const [a, b] of [
      [1, 2],
      [10, 20],
      [-5, 7],
    ] as const) {
      expect((await shapes.execute(database.db, 'sum', [a, b])).rows).toEqual([{ r: a + b, a }]);
      expect((await shapes.execute(database.db, 'difference', [a, b])).rows).toEqual([{ r: a - b, a }]);
    }
  });

  it('passes arrays and null as parameters', async () => {
    const shapes = new StatementShapes(
      (_: 'one', ids: string[], note: string | null) =>
        sql<{
          n: number;
          note: string | null;
        }>`SELECT cardinality(${ids}::bigint[]) AS n, ${note}::text AS note`,
    );
    expect((await shapes.execute(database.db, 'one', [['1', '2', '3'], null])).rows).toEqual([
      { n: 3, note: null },
    ]);
    expect((await shapes.execute(database.db, 'one', [[], 'x'])).rows).toEqual([{ n: 0, note: 'x' }]);
  });

  it('refuses a statement that puts a value into its text, or leaves one out', async () => {
    // Kysely refuses the placeholder as a literal; a value left out of the statement is refused here.
    const literal = new StatementShapes((_: 'one', n: number) => sql`SELECT ${sql.lit(n)} AS n`);
    await expect(literal.execute(database.db, 'one', [1])).rejects.toThrow();
    const unused = new StatementShapes((_: 'one', n: number) => sql`SELECT 1 AS n ${sql.raw(n ? '' : '')}`);
    await expect(unused.execute(database.db, 'one', [1])).rejects.toThrow(/not a parameter/);
    const extra = new StatementShapes((_: 'one', n: number) => sql`SELECT ${n}::int AS n, ${42}::int AS m`);
    await expect(extra.execute(database.db, 'one', [1])).rejects.toThrow(/not one of the values/);
  });
});
