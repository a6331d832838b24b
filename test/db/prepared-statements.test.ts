import { sql } from 'kysely';
import { describe, expect, it } from 'vitest';
import { createDatabase } from '../../src/db/database.js';
import { MAX_NAMED, StatementNames } from '../../src/db/prepared-statements.js';
import { claimJobs } from '../../src/jobs/claim/claim.js';
import { enqueueJobs } from '../../src/jobs/enqueue/enqueue.js';
import { noLog } from '../../src/logger.js';
import { useTestDatabase } from '../support/database.js';

const quiet = noLog;
const settings = { poolSize: 1, statementTimeoutMs: 30_000, connectTimeoutMs: 5_000 };
const enqueueOptions = {
  autoCreate: { enabled: true, maxQueues: 1000 },
  defaultMaxAttempts: 5,
  idempotencyRetentionMs: 60_000,
};

describe('named prepared statements', () => {
  const database = useTestDatabase();

  async function prepared(db: Parameters<typeof claimJobs>[0]) {
    const r = await sql<{ statement: string; generic_plans: string; custom_plans: string }>`
      SELECT statement, generic_plans, custom_plans FROM pg_prepared_statements`.execute(db);
    return r.rows;
  }

  it('prepares parameterised statements once per connection, and the claim settles on a generic plan', async () => {
    const handle = createDatabase(database.url, settings, quiet);
    try {
      const items = Array.from({ length: 8 }, (_, i) => ({ payloadJson: `{"i":${i}}`, priority: 0 }));
      await enqueueJobs(handle.db, 'prepared', items, enqueueOptions);
      for (let i = 0; i < 8; i++) {
        const [job] = await claimJobs(handle.db, { queue: 'prepared', maxJobs: 1, defaultLeaseMs: 30_000 });
        expect(job).toBeDefined();
      }
      const rows = await prepared(handle.db);
      const claim = rows.filter((r) => r.statement.includes('FOR UPDATE SKIP LOCKED'));
      expect(claim).toHaveLength(1);
      expect(Number(claim[0]!.generic_plans) + Number(claim[0]!.custom_plans)).toBe(8);
      // A LIMIT parameter would keep PostgreSQL re-planning the claim every time (custom plans only).
      expect(Number(claim[0]!.generic_plans)).toBeGreaterThan(0);
    } finally {
      await handle.close();
    }
  });

  it('sends nothing prepared when turned off', async () => {
    const handle = createDatabase(database.url, { ...settings, preparedStatements: false }, quiet);
    try {
      await enqueueJobs(handle.db, 'unprepared', [{ payloadJson: '{}', priority: 0 }], enqueueOptions);
      await claimJobs(handle.db, { queue: 'unprepared', maxJobs: 1, defaultLeaseMs: 30_000 });
      expect(await prepared(handle.db)).toEqual([]);
    } finally {
      await handle.close();
    }
  });

  it('names at most MAX_NAMED distinct texts and keeps each name', () => {
    const names = new StatementNames();
    const first = names.nameFor('SELECT $1');
    for (let i = 1; i < MAX_NAMED; i++) expect(names.nameFor(`SELECT $1 + ${i}`)).toBeDefined();
    expect(names.nameFor('SELECT $1, "one too many"')).toBeUndefined();
    expect(names.nameFor('SELECT $1')).toBe(first);
    expect(names.size).toBe(MAX_NAMED);
  });
});
