import fs from 'node:fs';
import path from 'node:path';
import { cruise, type IForbiddenRuleType } from 'dependency-cruiser';
import { describe, expect, it } from 'vitest';

/**
 * The layers docs/architecture.md promises, checked on the source so they stay true. The imports are
 * read by dependency-cruiser (type-only imports included), against these rules:
 * - no import cycle anywhere in src/;
 * - the protocols (routes/, sqs/, http/, plugins/) call the use cases (service/); the service calls
 *   the domain (jobs/, queues/, schedules/, maintenance/, wake/, db/, ...); nothing imports upwards:
 *   the domain knows nothing of the service or of HTTP and throws domain errors (src/errors.ts), and
 *   the service knows nothing of HTTP or SQS;
 * - routes/ and sqs/ write nothing themselves: the modules that change jobs (ack, nack, renew, cancel,
 *   enqueue, redrive, the claim, the statement groups) are the service's, and a protocol may import
 *   their types only;
 * - jobs/ may use queues/ (an enqueue reads queue settings), never the other way round;
 * - config (config.ts, config/) holds plain values and imports only itself and the leaf
 *   duration-limits.ts (what the domain must check, such as API keys or the schedules file, is read
 *   by startup-inputs.ts);
 * - the claim statement (jobs/claim/statement.ts) imports no claim file but types.ts: the picks build
 *   on it, not the other way round.
 * And on the text: jobs/ and maintenance/ are the only modules whose SQL touches the job tables, so
 * the storage layout can change behind them; routes and the SQS endpoint hold no SQL; config is the
 * only reader of process.env.
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
function _importedLayers(file: string, text: string): string[] {
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

const DOMAIN_PATH =
  '^src/(jobs|queues|schedules|maintenance|wake|db|auth|json|metrics|memory)/|^src/errors\\.ts$';
const WRITES =
  '^src/jobs/(ack|nack|renew|cancel|enqueue|redrive|delete-queue|delete-finished|run-now|statement-groups|claim/(?!types))';

const RULES: IForbiddenRuleType[] = [
  { name: 'no-cycle', severity: 'error', from: { path: '^src/' }, to: { circular: true } },
  {
    name: 'domain-imports-no-protocol-or-service',
    severity: 'error',
    from: { path: DOMAIN_PATH },
    to: { path: '^src/(service|http|routes|plugins|sqs)/' },
  },
  {
    name: 'service-imports-no-protocol',
    severity: 'error',
    from: { path: '^src/service/' },
    to: { path: '^src/(http|routes|plugins|sqs)/' },
  },
  {
    name: 'protocols-write-through-the-service',
    severity: 'error',
    // The SQS dead-letter duty is a leader duty (it moves dead jobs), not a protocol action.
    from: { path: '^src/(routes|sqs)/', pathNot: '^src/sqs/dead-letter\\.ts$' },
    to: { path: WRITES, dependencyTypesNot: ['type-only'] },
  },
  {
    name: 'queues-import-no-jobs',
    severity: 'error',
    from: { path: '^src/queues/' },
    to: { path: '^src/jobs/' },
  },
  {
    name: 'config-is-a-leaf',
    severity: 'error',
    from: { path: '^src/config(\\.ts$|/)' },
    to: { path: '^src/', pathNot: '^src/(config(\\.ts$|/)|duration-limits\\.ts$)' },
  },
  {
    name: 'claim-statement-imports-no-pick',
    severity: 'error',
    from: { path: '^src/jobs/claim/statement\\.ts$' },
    to: { path: '^src/jobs/claim/', pathNot: '^src/jobs/claim/types\\.ts$' },
  },
];

describe('the imports of src/ (dependency-cruiser)', () => {
  it('break no rule: no cycle, and no layer imports one above it', async () => {
    const { output } = await cruise([SRC], {
      ruleSet: { forbidden: RULES },
      validate: true,
      tsPreCompilationDeps: true,
      doNotFollow: { path: 'node_modules' },
      // Imports name the compiled .js file; the source beside it is the .ts one.
      // (enhanced-resolve's extensionAlias: dependency-cruiser passes it on, its types do not list it)
      enhancedResolveOptions: { extensionAlias: { '.js': ['.ts', '.js'] } } as never,
    });
    if (typeof output === 'string') throw new Error('dependency-cruiser answered text');
    const broken = output.summary.violations.map((v) => `${v.rule.name}: ${v.from} → ${v.to}`);
    expect(broken).toEqual([]);
    // The rules would catch it: every source file was read, and its imports resolved.
    expect(output.modules.filter((m) => m.source.startsWith(`${SRC}/`)).length).toBe(files.length);
  });
});

describe('the layers of src/', () => {
  it('has the folders the architecture describes', () => {
    for (const layer of [...DOMAIN, ...HTTP]) {
      expect(
        files.some((f) => f.layer === layer),
        layer,
      ).toBe(true);
    }
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

  it('config.ts is the only reader of process.env', () => {
    const readers = files.filter(
      (f) => f.file !== path.join(SRC, 'config.ts') && /process\.env/.test(f.text),
    );
    expect(readers.map((f) => f.file)).toEqual([]);
  });
});
