import { execFile } from 'node:child_process';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { parseAllDocuments } from 'yaml';
import { settings } from '../../src/config/settings.js';
import { useTestApp } from '../support/app.js';
import { useTestDatabase } from '../support/database.js';

/**
 * The files under deploy/ name settings, paths, ports and metrics; each is held here to what Baton
 * has, so that none goes stale when a setting is renamed or a metric dropped. The alert rules are
 * also checked by promtool (Debian's prometheus package, installed by .ci/run; required in CI).
 */
const database = useTestDatabase();
const app = useTestApp(database);

const root = new URL('../../', import.meta.url).pathname;
const read = (path: string) => readFileSync(join(root, path), 'utf8');
const yamlDocs = (path: string) =>
  parseAllDocuments(read(path), { merge: true }).map((d) => {
    expect(d.errors, path).toEqual([]);
    return d.toJS() as Record<string, any>;
  });

const settingNames = new Set(Object.values(settings).map((s) => s.env));
const PORT = 8080;

/** Metric names in PromQL text, with a histogram's series suffixes taken off. */
const metricsIn = (text: string) =>
  [...text.matchAll(/\b(baton_[a-z_]+)/g)].map((m) => m[1]!.replace(/_(bucket|count|sum)$/, ''));

async function exported(): Promise<Set<string>> {
  return new Set((await app.metrics.registry.getMetricsAsJSON()).map((m) => m.name));
}

const kube = readdirSync(join(root, 'deploy/kubernetes'))
  .filter((f) => f.endsWith('.yaml'))
  .flatMap((f) => yamlDocs(`deploy/kubernetes/${f}`).map((doc) => ({ file: f, doc })));
const ofKind = (kind: string) => kube.filter((k) => k.doc.kind === kind).map((k) => k.doc);
const containersOf = (doc: Record<string, any>) => doc.spec.template.spec.containers as Record<string, any>[];

describe('deploy/kubernetes', () => {
  it("Baton's containers set only settings Baton has, and probe paths that answer", async () => {
    const baton = ofKind('Deployment').find((d) => d.metadata.name === 'baton')!;
    const [container] = containersOf(baton);
    for (const { name } of container!.env) expect(settingNames, name).toContain(name);
    expect(container!.ports).toEqual([{ name: 'http', containerPort: PORT }]);
    for (const probe of ['startupProbe', 'livenessProbe', 'readinessProbe']) {
      const { path, port } = container![probe].httpGet;
      expect(port, probe).toBe('http');
      expect((await app.inject({ method: 'GET', url: path })).statusCode, `${probe} ${path}`).toBe(200);
    }
    // A liveness probe on /readyz would restart every pod in a database outage.
    expect(container!.livenessProbe.httpGet.path).toBe('/healthz');
    // Migrations run in the Job, not in every pod at once.
    expect(container!.env).toContainEqual({ name: 'BATON_MIGRATE_ON_START', value: 'false' });
    // The pod's grace outlasts Baton's own drain.
    const drainMs = Number(
      container!.env.find((e: { name: string }) => e.name === 'BATON_SHUTDOWN_TIMEOUT_MS').value,
    );
    expect(baton.spec.template.spec.terminationGracePeriodSeconds * 1000).toBeGreaterThan(drainMs);
  });

  it('the Service, PodDisruptionBudget and ServiceMonitor select the pods and port they mean', async () => {
    const labels = ofKind('Deployment').find((d) => d.metadata.name === 'baton')!.spec.template.metadata
      .labels;
    const [service] = ofKind('Service');
    expect(service!.spec.selector).toEqual(labels);
    expect(service!.spec.ports).toEqual([{ name: 'http', port: PORT, targetPort: 'http' }]);
    expect(ofKind('PodDisruptionBudget')[0]!.spec.selector.matchLabels).toEqual(labels);
    const [monitor] = ofKind('ServiceMonitor');
    expect(monitor!.spec.selector.matchLabels).toEqual(service!.metadata.labels);
    const [endpoint] = monitor!.spec.endpoints;
    expect(endpoint.port).toBe('http');
    expect((await app.inject({ method: 'GET', url: endpoint.path })).statusCode).toBe(200);
  });

  it('the migration Job runs the migration command the image carries', () => {
    const [job] = ofKind('Job');
    const [container] = job!.spec.template.spec.containers;
    expect(container.command).toEqual(['node', 'dist/src/cli/migrate.js']);
    expect(existsSync(join(root, 'src/cli/migrate.ts'))).toBe(true);
    for (const { name } of container.env) expect(settingNames, name).toContain(name);
  });

  it("KEDA scales workers on a metric Baton exports, and the workers' settings are the example worker's", async () => {
    const [scaled] = ofKind('ScaledObject');
    const workers = ofKind('Deployment').find((d) => d.metadata.name === scaled!.spec.scaleTargetRef.name)!;
    const [trigger] = scaled!.spec.triggers;
    expect(trigger.type).toBe('prometheus');
    const names = await exported();
    for (const metric of metricsIn(trigger.metadata.query)) expect(names, metric).toContain(metric);
    // Every replica reports the same queue counts: a sum would count them once per replica.
    expect(trigger.metadata.query).toMatch(/^max\(baton_jobs\{queue="email",state="ready"\}\)/);
    const documented = read('examples/worker.py').match(/^Settings: ([\s\S]*?)\. Each event/m)![1]!;
    const workerSettings = new Set([...documented.matchAll(/\b([A-Z][A-Z_]+)\b/g)].map((m) => m[1]));
    for (const { name } of containersOf(workers)[0]!.env) expect(workerSettings, name).toContain(name);
  });
});

describe('deploy/compose.yaml', () => {
  const [compose] = yamlDocs('deploy/compose.yaml');
  const services = compose!.services as Record<string, Record<string, any>>;

  it('sets only settings Baton has, migrates once before both replicas, and publishes them on loopback', () => {
    for (const name of ['migrate', 'baton-1', 'baton-2']) {
      for (const variable of Object.keys(services[name]!.environment)) {
        expect(settingNames, `${name}: ${variable}`).toContain(variable);
      }
    }
    expect(services.migrate!.command).toEqual(['node', 'dist/src/cli/migrate.js']);
    for (const name of ['baton-1', 'baton-2']) {
      expect(services[name]!.depends_on).toEqual({
        migrate: { condition: 'service_completed_successfully' },
      });
      expect(services[name]!.environment.BATON_MIGRATE_ON_START).toBe('false');
      expect(services[name]!.ports[0]).toMatch(new RegExp(`^127\\.0\\.0\\.1:\\d+:${PORT}$`));
    }
    expect(services.migrate!.depends_on).toEqual({ postgres: { condition: 'service_healthy' } });
    // The URL names the compose file's own database and user.
    const url = new URL(services['baton-1']!.environment.DATABASE_URL);
    expect([url.hostname, url.username, url.pathname]).toEqual([
      'postgres',
      services.postgres!.environment.POSTGRES_USER,
      `/${services.postgres!.environment.POSTGRES_DB}`,
    ]);
  });
});

describe('deploy/prometheus and deploy/grafana', () => {
  it('alert rules name only metrics Baton exports, and promtool accepts them', async () => {
    const [rules] = yamlDocs('deploy/prometheus/alerts.yaml');
    const names = await exported();
    const exprs = rules!.groups.flatMap((g: { rules: { expr: string }[] }) => g.rules.map((r) => r.expr));
    expect(exprs.length).toBeGreaterThan(10);
    for (const expr of exprs) for (const metric of metricsIn(expr)) expect(names, expr).toContain(metric);
    const promtool = ['/usr/bin/promtool', '/usr/local/bin/promtool'].find((p) => existsSync(p));
    if (!promtool) {
      // CI installs it (.ci/run); a developer's machine may not have it.
      expect(process.env.CI, 'promtool is missing (apt-get install prometheus)').toBeUndefined();
      return;
    }
    const { stdout } = await promisify(execFile)(promtool, [
      'check',
      'rules',
      join(root, 'deploy/prometheus/alerts.yaml'),
    ]);
    expect(stdout).toContain(`SUCCESS: ${exprs.length} rules found`);
  });

  it("the Grafana dashboard's panels query only metrics Baton exports", async () => {
    const dashboard = JSON.parse(read('deploy/grafana/baton.json'));
    const names = await exported();
    const exprs = dashboard.panels.flatMap((p: { targets: { expr: string }[] }) =>
      p.targets.map((t) => t.expr),
    );
    expect(exprs.length).toBeGreaterThan(10);
    for (const expr of exprs) for (const metric of metricsIn(expr)) expect(names, expr).toContain(metric);
  });
});
