import { sql } from 'kysely';
import type { Config } from '../config.js';
import type { Db } from './database.js';

/**
 * Do the request pool's sessions run with the timeouts Baton asks for? Sent at connect they always
 * do, unless something between drops them: PgBouncer with `ignore_startup_parameters` accepts them
 * and applies none. Behind a transaction pooler they must be the role's own settings (database.ts,
 * sessionSettings). Start-up reads them from a session of the pool and says which.
 */
export interface SessionSettingsCheck {
  /** Each timeout Baton asks for, and what the session has (ms; 0 is none). */
  settings: { name: string; wantMs: number; hasMs: number }[];
  /** Statements that would give every new session of this role and database the missing ones. */
  fix: string[];
}

const TIMEOUTS = ['statement_timeout', 'idle_in_transaction_session_timeout'] as const;

export async function checkSessionSettings(
  db: Db,
  config: Pick<Config, 'statementTimeoutMs'>,
): Promise<SessionSettingsCheck> {
  const { rows } = await sql<{ name: string; setting: string; role: string; database: string }>`
    SELECT name, setting, current_user AS role, current_database() AS database
    FROM pg_settings WHERE name IN (${sql.join([...TIMEOUTS])})`.execute(db);
  const settings = TIMEOUTS.map((name) => ({
    name,
    wantMs: config.statementTimeoutMs,
    hasMs: Number(rows.find((r) => r.name === name)?.setting ?? 0),
  }));
  const at = rows[0];
  const fix = at
    ? settings
        .filter((s) => s.hasMs !== s.wantMs)
        .map(
          (s) =>
            `ALTER ROLE ${quoteIdent(at.role)} IN DATABASE ${quoteIdent(at.database)} SET ${s.name} = '${s.wantMs}ms';`,
        )
    : [];
  return { settings, fix };
}

const quoteIdent = (name: string) => `"${name.replaceAll('"', '""')}"`;
