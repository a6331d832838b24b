import { type ChildProcess, execFile, spawn } from 'node:child_process';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { migrations } from '../../migrations/index.js';
import { useTestDatabase } from '../support/database.js';
import { freePort } from '../support/ports.js';
import { buildRelease, releases } from '../support/release-build.js';

const run = promisify(execFile);

/**
 * A rolling upgrade under load: two replicas of the release before (CHANGELOG.md's newest, built
 * from its commit) serve producers and workers; this release's migrations run beside them; then each
 * old replica is replaced by one of this release, one at a time, as a rollout does (the new one
 * ready first, the old one taken out of the load balancer, then sent SIGTERM). Checked: every job
 * answered 201 is completed once, every ack answered stands, nothing but 503 with Retry-After among
 * the errors, the old replicas stay ready on the migrated schema, and one maintenance leader at a
 * time with no long gap. docs/operating.md, "Upgrading".
 */
const database = useTestDatabase({ migrated: false });
let dir: string;
let previous: { version: string; commit: string };

beforeAll(async () => {
  dir = await fs.mkdtemp(path.join(os.tmpdir(), 'baton-upgrade-'));
  const [newest] = await releases();
  if (!newest) throw new Error('CHANGELOG.md names no release');
  previous = newest;
  await Promise.all([
    buildRelease(path.join(dir, 'previous'), previous.commit),
    buildRelease(path.join(dir, 'current')),
  ]);
}, 300_000);

afterAll(async () => {
  if (dir) await fs.rm(dir, { recursive: true, force: true });
});

class Replica {
  output = '';
  readonly exited: Promise<number | null>;
  private constructor(
    readonly name: string,
    readonly child: ChildProcess,
    readonly url: string,
  ) {
    this.exited = new Promise((resolve) => child.on('close', (code) => resolve(code)));
  }

  static async start(name: string, root: string, env: Record<string, string> = {}): Promise<Replica> {
    const port = await freePort();
    const child = spawn(process.execPath, [path.join(root, 'dist/baton.mjs')], {
      cwd: root,
      env: {
        ...process.env,
        DATABASE_URL: database.url,
        PORT: String(port),
        HOST: '127.0.0.1',
        LOG_LEVEL: 'warn',
        BATON_TICK_MS: '500',
        BATON_MIGRATE_ON_START: 'false',
        ...env,
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const replica = new Replica(name, child, `http://127.0.0.1:${port}`);
    const keep = (c: Buffer) => {
      replica.output += c;
    };
    child.stdout!.on('data', keep);
    child.stderr!.on('data', keep);
    const deadline = Date.now() + 30_000;
    while (Date.now() < deadline) {
      if (child.exitCode !== null) throw new Error(`${name} exited during start:\n${replica.output}`);
      if (
        await fetch(`${replica.url}/readyz`).then(
          (r) => r.ok,
          () => false,
        )
      )
        return replica;
      await new Promise((r) => setTimeout(r, 100));
    }
    child.kill('SIGKILL');
    throw new Error(`${name} did not become ready:\n${replica.output}`);
  }

  async stop(): Promise<number | null> {
    this.child.kill('SIGTERM');
    return this.exited;
  }
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('a rolling upgrade from the release before', () => {
  it('loses no job and no ack, answers only 503s with Retry-After, and keeps one leader at a time', async () => {
    const queue = 'upgrade';
    const previousRoot = path.join(dir, 'previous');
    const currentRoot = path.join(dir, 'current');
    const first = await Replica.start('previous-1', previousRoot, { BATON_MIGRATE_ON_START: 'true' });
    const second = await Replica.start('previous-2', previousRoot);
    const replicas = [first, second];
    // The load balancer: requests go round the replicas in it; one out of it gets none.
    const routed = [first, second];
    let turn = 0;
    const unexpected: string[] = [];
    let answered503 = 0;
    let refused = 0;
    const call = async (method: string, url: string, body: unknown): Promise<any> => {
      for (let attempt = 0; attempt < 200; attempt++) {
        const replica = routed[turn++ % routed.length]!;
        let res: Response;
        try {
          res = await fetch(`${replica.url}${url}`, {
            method,
            headers: { 'content-type': 'application/json' },
            body: JSON.stringify(body),
          });
        } catch {
          // A replica that closed its connection as it stopped: the next one gets the request.
          refused++;
          await sleep(20);
          continue;
        }
        if (res.status === 503) {
          answered503++;
          if (!res.headers.get('retry-after'))
            unexpected.push(`503 without Retry-After from ${replica.name}`);
          await res.arrayBuffer();
          await sleep(50);
          continue;
        }
        const text = await res.text();
        if (res.status >= 300) {
          unexpected.push(`${res.status} from ${replica.name}: ${text.slice(0, 200)}`);
          throw new Error(`unexpected ${res.status}`);
        }
        return text ? JSON.parse(text) : undefined;
      }
      throw new Error(`${method} ${url}: no replica answered`);
    };

    // One maintenance leader at a time: the lease row, sampled.
    const leaderDb = new pg.Client({ connectionString: database.url });
    await leaderDb.connect();
    let sampling = true;
    let longestGapMs = 0;
    let gapSince: number | undefined;
    const holders = new Set<string>();
    const sampler = (async () => {
      while (sampling) {
        const { rows } = await leaderDb.query<{ holder: string }>(
          "SELECT holder FROM baton.leader WHERE name = 'maintenance' AND expires_at > now()",
        );
        const now = performance.now();
        if (rows.length === 0) gapSince ??= now;
        else {
          if (gapSince !== undefined) longestGapMs = Math.max(longestGapMs, now - gapSince);
          gapSince = undefined;
          holders.add(rows[0]!.holder);
        }
        await sleep(50);
      }
    })();

    // Producers: batches of 5, each job with an idempotency key, so a batch sent again is safe.
    const enqueued = new Set<string>();
    let producing = true;
    let batch = 0;
    const producers = Array.from({ length: 2 }, async (_, p) => {
      while (producing) {
        const n = batch++;
        const jobs = Array.from({ length: 5 }, (_, i) => ({
          payload: { p, n, i },
          idempotency_key: `up-${p}-${n}-${i}`,
        }));
        const answer = await call('POST', `/v1/queues/${queue}/jobs/batch`, { jobs });
        for (const job of answer.jobs) enqueued.add(String(job.id));
      }
    });
    // Workers: claim 10, ack them in one batch (sent again as it is after a 503: acks are by lease token).
    const acked = new Map<string, number>();
    let working = true;
    const workers = Array.from({ length: 3 }, async () => {
      while (working) {
        const { jobs } = await call('POST', `/v1/queues/${queue}/claim`, { max_jobs: 10, wait_ms: 200 });
        if (jobs.length === 0) continue;
        const answer = await call('POST', '/v1/jobs/ack', {
          acks: jobs.map((j: { id: string; lease_token: string }) => ({
            id: j.id,
            lease_token: j.lease_token,
          })),
        });
        for (const r of answer.results) {
          if (r.outcome === 'acked') acked.set(String(r.id), (acked.get(String(r.id)) ?? 0) + 1);
          else unexpected.push(`ack of ${r.id}: ${r.outcome}`);
        }
      }
    });
    const load = Promise.all([...producers, ...workers]);
    const health: unknown[] = [];

    const t0 = performance.now();
    const step = (what: string) =>
      console.log(
        `${((performance.now() - t0) / 1000).toFixed(1)} s ${what}: ${enqueued.size} enqueued, ${acked.size} acked`,
      );
    try {
      await sleep(2000);
      step('migrating');
      // This release's migrations, while the release before serves.
      await run(process.execPath, [path.join(currentRoot, 'dist/src/cli/migrate.js')], {
        cwd: currentRoot,
        env: { ...process.env, DATABASE_URL: database.url, LOG_LEVEL: 'warn' },
      });
      step('migrated');
      await sleep(1000);
      // The release before stays ready on the schema this release migrated.
      for (const old of [first, second]) expect((await fetch(`${old.url}/readyz`)).status).toBe(200);

      for (const [i, old] of [first, second].entries()) {
        const next = await Replica.start(`current-${i + 1}`, currentRoot);
        step(`${next.name} ready`);
        routed.push(next);
        replicas.push(next);
        routed.splice(routed.indexOf(old), 1);
        expect(await old.stop(), old.output).toBe(0);
        step(`${old.name} stopped`);
        await sleep(1500);
      }
      producing = false;
      await Promise.all(producers);
      step('producers stopped');
      const deadline = Date.now() + 30_000;
      while (acked.size < enqueued.size && Date.now() < deadline) await sleep(100);
      working = false;
      await load;
      for (const r of replicas.slice(2)) health.push(await (await fetch(`${r.url}/healthz`)).json());
    } finally {
      producing = false;
      working = false;
      sampling = false;
      await sampler.catch(() => {});
      await leaderDb.end();
      for (const r of replicas) if (r.child.exitCode === null) r.child.kill('SIGKILL');
    }

    console.log(
      `rolling upgrade ${previous.version} (${previous.commit}) → this build: ${enqueued.size} jobs enqueued, ${acked.size} acked, ${answered503} answers 503, ${refused} connections refused or closed, ${holders.size} leaders in turn, longest time without one ${Math.round(longestGapMs)} ms`,
    );
    expect(unexpected).toEqual([]);
    expect(enqueued.size).toBeGreaterThan(100);
    // Every job answered 201 is completed, once, and every ack answered stands.
    expect([...enqueued].filter((id) => acked.get(id) !== 1)).toEqual([]);
    const check = new pg.Client({ connectionString: database.url });
    await check.connect();
    try {
      const { rows } = await check.query<{ state: string; n: string }>(
        `SELECT state, count(*)::text AS n FROM baton.job_history WHERE queue = $1 GROUP BY state
         UNION ALL SELECT 'live ' || state, count(*)::text FROM baton.jobs WHERE queue = $1 GROUP BY state`,
        [queue],
      );
      expect(Object.fromEntries(rows.map((r) => [r.state, Number(r.n)]))).toEqual({
        completed: enqueued.size,
      });
    } finally {
      await check.end();
    }
    // A leader at every moment but the hand-overs, each shorter than three ticks (elections run every quarter tick).
    expect(holders.size).toBeGreaterThanOrEqual(2);
    expect(longestGapMs).toBeLessThan(1500);
    // Each replica of this release says which release and schema it runs.
    const pkg = JSON.parse(await fs.readFile('package.json', 'utf8'));
    const schema = Object.keys(migrations).at(-1);
    expect(health).toEqual([0, 1].map(() => ({ status: 'ok', version: pkg.version, schema })));
  }, 180_000);
});
