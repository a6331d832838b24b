import { spawn } from 'node:child_process';
import { resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { BatonServer } from './baton-server.js';
import { adminPool, DATABASES, databaseUrl, recreateDatabase } from './databases.js';

/**
 * Leaderless moments: how long the maintenance leader's lease goes unrenewed while replicas are
 * starved of CPU. For each build (a directory holding `dist/`, as bench/request-cost.ts takes them),
 * in turn on a fresh database: three replicas with maintenance on, CPU hogs on every core, and the
 * leader stopped (SIGSTOP) for `--stall` ms every `--every` ms, as a loaded machine or a long GC
 * pause stalls a process. A trigger installed by this script on baton.leader logs each renewal and
 * takeover with the lease it replaced, so the database's own clock gives each gap: the time from the
 * old lease's expiry to the statement that renewed or took it. Also prints what each replica's
 * baton_leader_gap_seconds counted (builds that have it).
 *
 *   npx tsx bench/leader-gaps.ts --root .scratch/before --root . --seconds 40
 */

const { values } = parseArgs({
  options: {
    root: { type: 'string', multiple: true, default: [] },
    seconds: { type: 'string', default: '40' },
    tick: { type: 'string', default: '1000' },
    hogs: { type: 'string', default: '3' },
    stall: { type: 'string', default: '600' },
    every: { type: 'string', default: '3000' },
  },
});
const roots = values.root.length > 0 ? values.root : ['.'];
const seconds = Number(values.seconds);
const tick = Number(values.tick);

const LOG = `
  CREATE TABLE IF NOT EXISTS public.leader_log (at timestamptz, holder text, term bigint, old_holder text,
                                                old_expires timestamptz);
  CREATE OR REPLACE FUNCTION public.log_leader() RETURNS trigger LANGUAGE plpgsql AS $$
  BEGIN
    INSERT INTO public.leader_log VALUES (statement_timestamp(), NEW.holder, NEW.term,
      CASE WHEN TG_OP = 'UPDATE' THEN OLD.holder END, CASE WHEN TG_OP = 'UPDATE' THEN OLD.expires_at END);
    RETURN NEW;
  END $$;
  DROP TRIGGER IF EXISTS log_leader ON baton.leader;
  CREATE TRIGGER log_leader AFTER INSERT OR UPDATE ON baton.leader FOR EACH ROW EXECUTE FUNCTION public.log_leader();`;

async function run(root: string) {
  await recreateDatabase(DATABASES.baton);
  const ports = [3301, 3302, 3303];
  const env = { BATON_MAINTENANCE: 'true', BATON_TICK_MS: String(tick), LOG_LEVEL: 'error' };
  const replicas = ports.map(
    (port) => new BatonServer({ databaseUrl: databaseUrl(DATABASES.baton), port, env, root }),
  );
  // The first migrates; then the trigger that logs the leases goes on baton.leader.
  await replicas[0]!.start();
  const pool = adminPool(DATABASES.baton, 1);
  await pool.query(LOG);
  await Promise.all(replicas.slice(1).map((r) => r.start()));
  const hogs = Array.from({ length: Number(values.hogs) }, () =>
    spawn(process.execPath, ['-e', 'for (;;) {}'], { stdio: 'ignore' }),
  );
  const start = Date.now();
  const stalls = (async () => {
    while (Date.now() - start < seconds * 1000) {
      await new Promise((r) => setTimeout(r, Number(values.every)));
      const { rows } = await pool.query<{ holder: string }>(
        `SELECT holder FROM baton.leader WHERE name = 'maintenance'`,
      );
      // holder is host:pid:random; stop the leader's process for a moment.
      const pid = Number(rows[0]?.holder.split(':')[1]);
      if (!replicas.some((r) => r.pid === pid)) continue;
      process.kill(pid, 'SIGSTOP');
      await new Promise((r) => setTimeout(r, Number(values.stall)));
      process.kill(pid, 'SIGCONT');
    }
  })();
  await stalls;
  for (const h of hogs) h.kill('SIGKILL');
  const metrics = await Promise.all(
    ports.map((p) =>
      fetch(`http://127.0.0.1:${p}/metrics`)
        .then((r) => r.text())
        .catch(() => ''),
    ),
  );
  const { rows } = await pool.query<{
    renewals: number;
    takeovers: number;
    gaps: number;
    max_ms: number;
    total_ms: number;
  }>(`
    SELECT count(*) FILTER (WHERE holder = old_holder)::int AS renewals,
           count(*) FILTER (WHERE holder <> old_holder)::int AS takeovers,
           count(*) FILTER (WHERE at > old_expires)::int AS gaps,
           coalesce(max(extract(epoch FROM at - old_expires) * 1000) FILTER (WHERE at > old_expires), 0)::float8 AS max_ms,
           coalesce(sum(extract(epoch FROM at - old_expires) * 1000) FILTER (WHERE at > old_expires), 0)::float8 AS total_ms
    FROM public.leader_log WHERE old_expires IS NOT NULL`);
  await pool.end();
  await Promise.all(replicas.map((r) => r.stop()));
  const counted = metrics
    .flatMap((m) => m.split('\n').filter((l) => /^baton_leader_gap_seconds_(count|sum)/.test(l)))
    .join('; ');
  const has = metrics.some((m) => m.includes('# HELP baton_leader_gap_seconds'));
  return {
    ...rows[0]!,
    counted: counted || (has ? 'none' : 'n/a (no baton_leader_gap_seconds in this build)'),
  };
}

console.log(
  `${seconds} s per build, tick ${tick} ms, ${values.hogs} CPU hogs, the leader stopped ${values.stall} ms every ${values.every} ms`,
);
for (const root of roots) {
  const r = await run(resolve(root));
  console.log(
    `${root}: renewals ${r.renewals}, takeovers ${r.takeovers}, leaderless moments ${r.gaps} ` +
      `(longest ${r.max_ms.toFixed(0)} ms, ${r.total_ms.toFixed(0)} ms in all)\n  replicas counted: ${r.counted}`,
  );
}
