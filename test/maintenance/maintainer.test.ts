import { sql } from 'kysely';
import { describe, expect, it } from 'vitest';
import { Maintainer } from '../../src/maintenance/maintainer.js';
import { Metrics } from '../../src/metrics/metrics.js';
import { testConfig, useTestApp } from '../support/app.js';
import { useTestDatabase } from '../support/database.js';
import { api, enqueueAndClaim } from '../support/http.js';

const database = useTestDatabase();
const app = useTestApp(database);
const quiet = { info: () => {}, warn: () => {}, error: () => {} };

describe('maintainer', () => {
  it('runs every duty once and reports each one’s counts', async () => {
    const metrics = new Metrics();
    const maintainer = new Maintainer({
      db: database.db,
      metrics,
      log: quiet,
      jobsReady: () => {},
      config: testConfig(),
    });
    const job = await enqueueAndClaim(app, 'm-once');
    await sql`UPDATE baton.jobs SET lease_expires_at = now() - interval '1 s' WHERE id = ${job.id}`.execute(
      database.db,
    );
    const results = await maintainer.runOnce();
    expect(Object.keys(results).sort()).toEqual([
      'claim_floors',
      'expire_keys',
      'expiry',
      'group_stats',
      'history_partitions',
      'job_edges',
      'message_moves',
      'promote',
      'prune',
      'queue_gc',
      'queue_history',
      'queue_stats',
      'rearm',
      'ring',
      'schedules',
      'vacuum',
      'workers',
    ]);
    expect((results.rearm as { total: number }).total).toBe(1);
    const text = await metrics.registry.metrics();
    for (const duty of ['rearm', 'promote', 'prune', 'expire_keys', 'queue_gc']) {
      expect(text).toMatch(
        new RegExp(`baton_maintenance_last_success_timestamp_seconds\\{duty="${duty}"\\} \\d`),
      );
    }
  });

  it('a failing duty is logged and counted and does not stop the others', async () => {
    const metrics = new Metrics();
    const errors: string[] = [];
    const log = { ...quiet, error: (obj: object) => errors.push((obj as { duty: string }).duty) };
    const maintainer = new Maintainer({
      db: database.db,
      metrics,
      log,
      jobsReady: () => {},
      config: testConfig(),
    });
    const job = await enqueueAndClaim(app, 'm-fail');
    await sql`UPDATE baton.jobs SET lease_expires_at = now() - interval '1 s' WHERE id = ${job.id}`.execute(
      database.db,
    );
    // Break two duties for real: the table they write is gone for a moment.
    await sql`ALTER TABLE baton.idempotency_keys RENAME TO idempotency_keys_away`.execute(database.db);
    try {
      const results = await maintainer.runOnce();
      expect(results.expire_keys).toBeUndefined();
      expect(results.prune).toBeUndefined();
      expect((results.rearm as { total: number }).total).toBe(1);
      expect(results.promote).toBeDefined();
      expect(results.queue_gc).toBeDefined();
    } finally {
      await sql`ALTER TABLE baton.idempotency_keys_away RENAME TO idempotency_keys`.execute(database.db);
    }
    expect(errors.sort()).toEqual(['expire_keys', 'prune']);
    const text = await metrics.registry.metrics();
    expect(text).toMatch(/baton_maintenance_runs_total\{duty="expire_keys",outcome="error"\} 1/);
    expect(text).toMatch(/baton_maintenance_runs_total\{duty="rearm",outcome="ok"\} 1/);
    expect(text).toMatch(/baton_prune_total\{outcome="error"\} 1/);
    expect((await api(app).get(job.id)).body.state).toBe('ready');
  });
});
