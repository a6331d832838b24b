import { CompiledQuery, type QueryResult, type RawBuilder } from 'kysely';
import type { Db } from './database.js';

/**
 * Hot statements compiled once per shape, then run with fresh values.
 *
 * Kysely builds a `sql` template into nodes and compiles them to text on every call, and the fresh
 * text of a claim (kilobytes) then costs the named-statement lookup (prepared-statements.ts) a hash
 * and a compare (docs/benchmarks.md, "What was tried and
 * what it gave", row "Statements compiled once per shape"). A statement whose text depends only on a few
 * choices (its shape: a literal LIMIT, which variant of a clause) is compiled once per shape here, with
 * a placeholder for each value; later calls put their values where the placeholders were and send the
 * same text, the same string.
 *
 * `build` must put every value it is given into the statement as a parameter, never into the text
 * (no sql.lit, no sql.raw, no identifier made from it): a value that ended up in the text would be
 * frozen into every later call. Compiling checks that each parameter is one of the placeholders, and
 * refuses the statement otherwise. Everything that does change the text belongs in `shape`.
 */

class Placeholder {
  constructor(readonly index: number) {}
}

interface Shape {
  sql: string;
  /** For each parameter of the compiled text, the index of the value that goes there. */
  positions: number[];
}

/** Shapes kept per cache: a caller's shapes are a few literals and variants, never a value. */
const MAX_SHAPES = 64;

export class StatementShapes<S extends string, V extends unknown[], R> {
  private readonly shapes = new Map<S, Shape>();

  /** @param build the statement of a shape, with the values it is given as its parameters */
  constructor(private readonly build: (shape: S, ...values: V) => RawBuilder<R>) {}

  /** Run the statement of this shape with these values (in the order `build` takes them). */
  execute(db: Db, shape: S, values: V): Promise<QueryResult<R>> {
    let compiled = this.shapes.get(shape);
    if (compiled === undefined) {
      try {
        compiled = this.compile(db, shape, values.length);
      } catch (err) {
        return Promise.reject(err);
      }
    }
    const parameters = new Array<unknown>(compiled.positions.length);
    for (let i = 0; i < parameters.length; i++) parameters[i] = values[compiled.positions[i]!];
    return db.executeQuery<R>(CompiledQuery.raw(compiled.sql, parameters) as CompiledQuery<R>);
  }

  private compile(db: Db, shape: S, arity: number): Shape {
    const placeholders = Array.from({ length: arity }, (_, i) => new Placeholder(i)) as unknown as V;
    const { sql, parameters } = this.build(shape, ...placeholders).compile(db);
    const positions = parameters.map((p) => {
      if (!(p instanceof Placeholder)) {
        throw new Error(`statement shape ${shape}: a parameter is not one of the values given to build()`);
      }
      return p.index;
    });
    for (let i = 0; i < arity; i++) {
      if (!positions.includes(i)) throw new Error(`statement shape ${shape}: value ${i} is not a parameter`);
    }
    const compiled = { sql, positions };
    if (this.shapes.size < MAX_SHAPES) this.shapes.set(shape, compiled);
    return compiled;
  }
}
