import fs from 'node:fs';
import path from 'node:path';
import { cruise, type IForbiddenRuleType } from 'dependency-cruiser';
import { describe, expect, it } from 'vitest';

/**
 * The layers docs/architecture.md promises, checked on the source so they stay true. The imports are
 * read by dependency-cruiser (type-only imports included), against these rules:
 * - no import cycle anywhere in src/ or in the dashboard (ui/src), and no dashboard page imports
 *   another;
 * - every file of src/ is in one of the LAYERS below (foundation, domain, service, protocol, entry)
 *   and imports nothing from a layer above its own: the domain knows nothing of the service or of
 *   HTTP and throws domain errors (src/errors.ts), the service knows nothing of HTTP or SQS, and
 *   the database layer nothing of the domain;
 * - routes/ and sqs/ write nothing themselves: the modules that change jobs (ack, nack, renew, cancel,
 *   enqueue and its rules, redrive, the claim, the statement groups) and schedules are the service's,
 *   and a protocol may import their types only; nor do they hold the database handle to read (only
 *   the readiness probe does);
 * - jobs/ may use queues/ (an enqueue reads queue settings), never the other way round;
 * - config (config.ts, config/) holds plain values and imports only itself and the leaf
 *   duration-limits.ts (what the domain must check, such as API keys or the schedules file, is read
 *   by startup-inputs.ts);
 * - the claim statement (jobs/claim/statement.ts) imports no claim file but types.ts: the picks build
 *   on it, not the other way round;
 * - the tests import nothing from bench/ (bench/ may use test/support/, not the other way round).
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

/**
 * Every file of src/ is in one layer, lowest first; a file imports only from its own layer or one
 * below it. A file in no layer fails the test, so a new folder must be placed here.
 */
const LAYERS: { name: string; paths: string[] }[] = [
  {
    name: 'foundation',
    paths: [
      'config.ts',
      'config/',
      'duration-limits.ts',
      'version.ts',
      'logger.ts',
      'errors.ts',
      'job-states.ts',
      'json/',
      'metrics/',
      'db/',
    ],
  },
  {
    name: 'domain',
    paths: [
      'jobs/',
      'queues/',
      'schedules/',
      'maintenance/',
      'wake/',
      'auth/',
      'memory/',
      'push/',
      'tracing/',
    ],
  },
  { name: 'service', paths: ['service/'] },
  { name: 'protocol', paths: ['http/', 'routes/', 'plugins/', 'sqs/', 'delivery/'] },
  { name: 'entry', paths: ['app.ts', 'server.ts', 'startup-errors.ts', 'startup-inputs.ts', 'cli/'] },
];
const layerPattern = (paths: string[]) =>
  paths.map((p) => `^src/${p.replace(/\./g, '\\.')}${p.endsWith('/') ? '' : '$'}`).join('|');
const LAYER_RULES: IForbiddenRuleType[] = LAYERS.slice(0, -1).map((layer, i) => ({
  name: `${layer.name}-imports-no-layer-above`,
  severity: 'error',
  from: { path: layerPattern(layer.paths) },
  to: { path: layerPattern(LAYERS.slice(i + 1).flatMap((l) => l.paths)) },
}));
const WRITES =
  '^src/jobs/(ack|nack|renew|cancel|enqueue|expiry-rule|redrive|delete-queue|delete-finished|run-now|statement-groups|claim/(?!types))|^src/schedules/(manage|store)\\.ts$';

const RULES: IForbiddenRuleType[] = [
  { name: 'no-cycle', severity: 'error', from: { path: '^src/' }, to: { circular: true } },
  ...LAYER_RULES,
  {
    name: 'protocols-write-through-the-service',
    severity: 'error',
    from: { path: '^src/(routes|sqs)/' },
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
  it('places every file of src/ in exactly one layer', () => {
    const rel = (file: string) => path.relative(SRC, file).split(path.sep).join('/');
    const placed = (file: string) =>
      LAYERS.filter((l) =>
        l.paths.some((p) => (p.endsWith('/') ? rel(file).startsWith(p) : rel(file) === p)),
      );
    expect(files.filter((f) => placed(f.file).length !== 1).map((f) => f.file)).toEqual([]);
  });

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

  it('routes and SQS actions reach the database only through the service (reads too)', () => {
    // The readiness probe asks the database itself whether it answers: it is no use case.
    const withHandle = files
      .filter((f) => f.layer === 'routes' || f.layer === 'sqs')
      .filter((f) => f.file !== path.join(SRC, 'routes', 'health.ts'))
      .filter((f) => /\b(app|deps|server)\.db\b|\bDb\b/.test(f.text))
      .map((f) => f.file);
    expect(withHandle).toEqual([]);
    // The check would catch it: the probe does hold the handle.
    expect(
      files.some((f) => f.file === path.join(SRC, 'routes', 'health.ts') && /app\.db\b/.test(f.text)),
    ).toBe(true);
  });

  it('config.ts is the only reader of process.env', () => {
    const readers = files.filter(
      (f) => f.file !== path.join(SRC, 'config.ts') && /process\.env/.test(f.text),
    );
    expect(readers.map((f) => f.file)).toEqual([]);
  });
});

/** The .ts files under a folder, as paths from the repository's root. */
function tsFilesUnder(dir: string): string[] {
  if (!fs.existsSync(dir)) return [];
  return fs.readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const full = path.join(dir, entry.name);
    if (entry.isDirectory()) return entry.name === 'node_modules' ? [] : tsFilesUnder(full);
    return /\.tsx?$/.test(entry.name) ? [full] : [];
  });
}

describe('the tests', () => {
  it('import nothing from bench/ (what both use lives under test/support/)', () => {
    const testFiles = [
      ...tsFilesUnder('test'),
      ...fs.readdirSync('clients').flatMap((c) => tsFilesUnder(path.join('clients', c, 'test'))),
    ];
    const intoBench = testFiles.flatMap((file) =>
      importedFiles(file, fs.readFileSync(file, 'utf8'))
        .filter((to) => to.split(path.sep)[0] === 'bench')
        .map((to) => `${file} → ${to}`),
    );
    expect(intoBench).toEqual([]);
    // The check reads the tests' imports: the harness they share is found.
    expect(
      testFiles.some((f) =>
        importedFiles(f, fs.readFileSync(f, 'utf8')).some((to) => to.startsWith('test/support')),
      ),
    ).toBe(true);
  });
});

describe('the imports of the dashboard (ui/src, dependency-cruiser)', () => {
  it('have no cycle, and no page imports another (only the page table imports pages)', async () => {
    const { output } = await cruise(['ui/src'], {
      ruleSet: {
        forbidden: [
          { name: 'no-cycle', severity: 'error', from: { path: '^ui/src/' }, to: { circular: true } },
          {
            name: 'pages-import-no-page',
            severity: 'error',
            from: { path: '^ui/src/', pathNot: '^ui/src/(pages/index\\.ts|app\\.tsx)$' },
            to: { path: '^ui/src/pages/' },
          },
        ],
      },
      validate: true,
      tsPreCompilationDeps: true,
      doNotFollow: { path: 'node_modules' },
      enhancedResolveOptions: { extensionAlias: { '.js': ['.ts', '.tsx', '.js'] } } as never,
    });
    if (typeof output === 'string') throw new Error('dependency-cruiser answered text');
    expect(output.summary.violations.map((v) => `${v.rule.name}: ${v.from} → ${v.to}`)).toEqual([]);
    const pages = output.modules.filter((m) => m.source.startsWith('ui/src/pages/'));
    expect(pages.length).toBe(fs.readdirSync('ui/src/pages').length);
    expect(pages.find((m) => m.source === 'ui/src/pages/index.ts')?.dependencies.length).toBeGreaterThan(5);
  });
});

describe('the docs', () => {
  const markdown = (dir: string): string[] =>
    fs.readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
      const full = path.join(dir, entry.name);
      if (entry.isDirectory()) return markdown(full);
      return entry.name.endsWith('.md') ? [full] : [];
    });

  it('link only to files that exist', () => {
    const docs = [
      ...markdown('docs'),
      'README.md',
      'clients/typescript/README.md',
      'clients/python/README.md',
    ];
    const broken = docs.flatMap((doc) =>
      [...fs.readFileSync(doc, 'utf8').matchAll(/\]\(([^)#\s]+)(?:#[^)]*)?\)/g)]
        .map((m) => m[1]!)
        .filter((to) => !/^[a-z]+:/.test(to) && !fs.existsSync(path.join(path.dirname(doc), to)))
        .map((to) => `${doc} → ${to}`),
    );
    expect(broken).toEqual([]);
  });

  it('name only source files that exist', () => {
    const layer = '(?:jobs|queues|schedules|maintenance|wake|service|routes|sqs|http|plugins|db)';
    const pathOf = new RegExp(`(?<![\\w/.-])((?:src/)?${layer}/[\\w./-]+\\.ts)`, 'g');
    const stale = [...markdown('docs'), 'README.md'].flatMap((doc) =>
      [...fs.readFileSync(doc, 'utf8').matchAll(pathOf)]
        .map((m) => m[1]!)
        .filter((f) => !fs.existsSync(f) && !fs.existsSync(path.join(SRC, f)))
        .map((f) => `${doc} → ${f}`),
    );
    expect(stale).toEqual([]);
  });

  it('index every decision record in docs/adr/README.md, with its status', () => {
    const index = fs.readFileSync('docs/adr/README.md', 'utf8');
    const records = fs.readdirSync('docs/adr').filter((f) => /^\d{4}-.*\.md$/.test(f));
    expect(records.length).toBeGreaterThan(5);
    const unindexed = records.filter(
      (f) =>
        !new RegExp(`\\]\\(${f.replace('.', '\\.')}\\) \\|.+\\| (accepted|proposed|superseded)`).test(index),
    );
    expect(unindexed).toEqual([]);
    for (const f of records) expect(fs.readFileSync(path.join('docs/adr', f), 'utf8')).toMatch(/^Status: /m);
  });

  it('docs/architecture.md names only source files that exist', () => {
    const text = fs.readFileSync('docs/architecture.md', 'utf8');
    const named = [...text.matchAll(/`([\w./-]+\.(?:ts|sql))`/g)]
      .map((m) => m[1]!)
      .filter((f) => !f.includes('*'));
    expect(named.length).toBeGreaterThan(20);
    const missing = named.filter(
      (f) => ![f, path.join(SRC, f), path.join(SRC, 'jobs', 'sql', f)].some((p) => fs.existsSync(p)),
    );
    expect(missing).toEqual([]);
  });
});
