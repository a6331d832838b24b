import type pg from 'pg';

/**
 * What one measured run made PostgreSQL write, per job: WAL bytes (from the WAL position, exact and
 * server-wide: runs are measured one at a time) and row versions inserted, updated (of them HOT)
 * and deleted in the system's database (from pg_stat_user_tables, which backends report at the end
 * of a transaction at most once a second, so `stop()` waits for the last reports first).
 */
export interface Writes {
  walBytes: number;
  inserted: number;
  updated: number;
  hotUpdated: number;
  deleted: number;
}

/** The WAL position and the database's row counts now (walBytes: 0, a reading has no span). */
interface Reading extends Writes {
  lsn: string;
}

/** Backends report their table counts at most once a second (PGSTAT_MIN_INTERVAL), or when idle 10 s. */
const STATS_SETTLE_MS = 11_000;

async function read(pool: pg.Pool): Promise<Reading> {
  const { rows } = await pool.query<{ lsn: string; ins: string; upd: string; hot: string; del: string }>(
    `SELECT pg_current_wal_lsn()::text AS lsn, coalesce(sum(n_tup_ins), 0)::text AS ins,
            coalesce(sum(n_tup_upd), 0)::text AS upd, coalesce(sum(n_tup_hot_upd), 0)::text AS hot,
            coalesce(sum(n_tup_del), 0)::text AS del
     FROM pg_stat_user_tables`,
  );
  const r = rows[0]!;
  return {
    lsn: r.lsn,
    walBytes: 0,
    inserted: Number(r.ins),
    updated: Number(r.upd),
    hotUpdated: Number(r.hot),
    deleted: Number(r.del),
  };
}

export class WriteMeter {
  private start?: Reading;
  constructor(private readonly pool: pg.Pool) {}

  async begin(): Promise<void> {
    await new Promise((r) => setTimeout(r, STATS_SETTLE_MS));
    this.start = await read(this.pool);
  }

  /** WAL is read at once; the row counts after the backends' last reports have arrived. */
  async end(): Promise<Writes> {
    const { rows } = await this.pool.query<{ bytes: string }>(
      'SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), $1)::text AS bytes',
      [this.start!.lsn],
    );
    await new Promise((r) => setTimeout(r, STATS_SETTLE_MS));
    const now = await read(this.pool);
    const s = this.start!;
    return {
      walBytes: Number(rows[0]!.bytes),
      inserted: now.inserted - s.inserted,
      updated: now.updated - s.updated,
      hotUpdated: now.hotUpdated - s.hotUpdated,
      deleted: now.deleted - s.deleted,
    };
  }
}

/** One line: per job. */
export function perJob(w: Writes, jobs: number): string {
  const f = (n: number) => (n / jobs).toFixed(2);
  return `WAL ${Math.round(w.walBytes / jobs)} B/job, rows per job: ${f(w.inserted)} inserted, ${f(w.updated)} updated (${f(w.hotUpdated)} HOT), ${f(w.deleted)} deleted`;
}
