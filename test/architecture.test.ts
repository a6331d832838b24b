import fs from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';

/**
 * The layers docs/architecture.md promises, checked on the source so they stay true:
 * - the domain (jobs/, queues/, schedules/, maintenance/, wake/, db/, ...) knows nothing of HTTP: it imports
 *   nothing from http/, routes/ or plugins/, and throws domain errors (src/errors.ts);
 * - jobs/ may use queues/ (an enqueue reads queue settings), never the other way round;
 * - jobs/ and maintenance/ are the only modules whose SQL touches the job tables, so the storage
 *   layout can change behind them;
 * - routes hold no SQL; config.ts is the only reader of process.env;
 * - config (config.ts, config/) holds plain values and imports only itself and the leaf
 *   duration-limits.ts, so it can join no import cycle, however long (what the domain must check,
 *   such as API keys or the schedules file, is read by startup-inputs.ts);
 * - the claim (jobs/claim/), the ack and the statement groups import no file that leads back to them, and
 *   the claim statement (jobs/claim/statement.ts) no claim file but types.ts (the picks import it);
 * - the SQS endpoint (sqs/) is a protocol layer like routes/: no SQL, and the domain never imports it.
 */
const SRC = 'src';

function sourceFiles(dir: string): string[] {
  return fs.readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const full = path.join(dir, entry.name);
    if (entry.isDirectory()) return sourceFiles(full);
    return entry.name.endsWith('.ts') ? [full] : [];
  });
}

const files = sourceFiles(SRC).map((file) => ({
  file,
  layer: path.relative(SRC, file).split(path.sep)[0]!,
  text: fs.readFileSync(file, 'utf8'),
}));

/** The src/ files a file imports (and re-exports) from, as paths like src/jobs/limits.ts. */
function importedFiles(file: string, text: string): string[] {
  return [...text.matchAll(/from '(\.\.?\/[^']+)'/g)].map((m) =>
    path.relative('.', path.resolve(path.dirname(file), m[1]!.replace(/\.js$/, '.ts'))),
  );
}

/** The src/ folders (or top-level files) a file imports from. */
function importedLayers(file: string, text: string): string[] {
  return importedFiles(file, text).map((f) => path.relative(SRC, f).split(path.sep)[0]!);
}

const DOMAIN = [
  'jobs',
  'queues',
  'schedules',
  'maintenance',
  'wake',
  'db',
  'auth',
  'json',
  'metrics',
  'errors.ts',
];
const HTTP = ['http', 'routes', 'plugins', 'sqs'];
const JOB_TABLES =
  /\b(FROM|INTO|UPDATE|JOIN|USING)\s+baton\.(jobs|job_history|idempotency_keys)\b|(selectFrom|insertInto|updateTable|deleteFrom)\(\s*'baton\.(jobs|job_history|idempotency_keys)'/i;

describe('the layers of src/', () => {
  it('has the folders the architecture describes', () => {
    for (const layer of [...DOMAIN, ...HTTP]) {
      expect(
        files.some((f) => f.layer === layer),
        layer,
      ).toBe(true);
    }
  });

  it('the domain imports nothing from http/, routes/ or plugins/', () => {
    const leaks = files
      .filter((f) => DOMAIN.includes(f.layer))
      .flatMap((f) =>
        importedLayers(f.file, f.text)
          .filter((l) => HTTP.includes(l))
          .map((l) => `${f.file} → ${l}/`),
      );
    expect(leaks).toEqual([]);
  });

  it('queues/ never imports jobs/ (jobs/ uses queues/, so the two never form a cycle)', () => {
    const back = files
      .filter((f) => f.layer === 'queues')
      .filter((f) => importedLayers(f.file, f.text).includes('jobs'))
      .map((f) => f.file);
    expect(back).toEqual([]);
  });

  it('only jobs/ and maintenance/ hold SQL over the job tables', () => {
    const outside = files
      .filter((f) => f.layer !== 'jobs' && f.layer !== 'maintenance' && JOB_TABLES.test(f.text))
      .map((f) => f.file);
    expect(outside).toEqual([]);
    // The check would catch it: the files that do hold such SQL are found.
    expect(files.filter((f) => JOB_TABLES.test(f.text)).length).toBeGreaterThan(5);
  });

  it('routes and the SQS endpoint hold no SQL', () => {
    const withSql = files
      .filter((f) => f.layer === 'routes' || f.layer === 'sqs')
      .filter((f) => /from 'kysely'|\bsql`|\.(selectFrom|insertInto|updateTable|deleteFrom)\(/.test(f.text))
      .map((f) => f.file);
    expect(withSql).toEqual([]);
  });

  it('config imports nothing but its own modules and the leaf duration-limits.ts (so it is in no cycle)', () => {
    const leaf = files.find((f) => f.file === path.join(SRC, 'duration-limits.ts'))!;
    const config = files.filter((f) => f.layer === 'config' || f.layer === 'config.ts');
    expect(config.length).toBeGreaterThan(1);
    const allowed = new Set([...config.map((f) => f.file), leaf.file]);
    const outside = config.flatMap((f) =>
      importedFiles(f.file, f.text)
        .filter((i) => !allowed.has(i))
        .map((i) => `${f.file} → ${i}`),
    );
    expect(outside).toEqual([]);
    expect(importedFiles(leaf.file, leaf.text)).toEqual([]);
  });

  it('the claim (jobs/claim/) is no import cycle: its statement imports no claim file but types.ts, and nothing leads back', () => {
    const claim = path.join(SRC, 'jobs', 'claim');
    const statement = path.join(claim, 'statement.ts');
    expect(
      importedFiles(statement, files.find((f) => f.file === statement)!.text).filter(
        (i) => path.dirname(i) === claim,
      ),
    ).toEqual([path.join(claim, 'types.ts')]);
    // No file of the claim, nor the ack and the statement groups around it, can reach itself.
    const graph = new Map(files.map((f) => [f.file, importedFiles(f.file, f.text)]));
    const reachesItself = (start: string) => {
      const seen = new Set<string>();
      const todo = [...(graph.get(start) ?? [])];
      while (todo.length > 0) {
        const next = todo.pop()!;
        if (next === start) return true;
        if (seen.has(next)) continue;
        seen.add(next);
        todo.push(...(graph.get(next) ?? []));
      }
      return false;
    };
    const watched = files
      .map((f) => f.file)
      .filter(
        (f) =>
          path.dirname(f) === claim ||
          f === path.join(SRC, 'jobs', 'ack.ts') ||
          f === path.join(SRC, 'jobs', 'statement-groups.ts'),
      );
    expect(watched.length).toBeGreaterThan(5);
    expect(watched.filter(reachesItself)).toEqual([]);
  });

  it('config.ts is the only reader of process.env', () => {
    const readers = files.filter(
      (f) => f.file !== path.join(SRC, 'config.ts') && /process\.env/.test(f.text),
    );
    expect(readers.map((f) => f.file)).toEqual([]);
  });
});
