import { type Kysely, sql } from 'kysely';

/**
 * The job fields a schedule gives each job it enqueues, besides priority and max_attempts (issue 18):
 * - `group_key`: the job's group (flow control). NULL: none. The first grouped job marks its queue
 *   grouped, as any enqueue does.
 * - `timeout_ms`: the job's budget per attempt. NULL: the queue's.
 * - `expires_in_ms`: each job expires this long after it is enqueued. NULL: never. Relative only:
 *   a fixed expires_at would expire every later occurrence's job at once.
 * - `unique_key`, `on_conflict`: at most one waiting job per queue and key; an occurrence whose key
 *   a waiting job holds is folded into it (keep) or updates it (replace). NULL: no key. on_conflict
 *   is set exactly when unique_key is.
 *
 * Nullable, no defaults: adding them rewrites nothing, and an existing schedule enqueues exactly
 * the jobs it did. The bounds are the enqueue API's (src/jobs/limits.ts), written out here because a
 * migration never imports src/.
 *
 * A schedule from BATON_SCHEDULES_FILE is compared with the definition the file last set
 * (file_spec) to tell whether the API changed it since ("drifted"). The row's definition now has
 * these five fields too, so file_spec gets them, as null, for rows written before: otherwise every
 * file schedule would look drifted after the upgrade.
 */
export async function up(db: Kysely<any>): Promise<void> {
  await sql`
    ALTER TABLE baton.schedules
      ADD COLUMN group_key text,
      ADD COLUMN timeout_ms integer,
      ADD COLUMN expires_in_ms bigint,
      ADD COLUMN unique_key text,
      ADD COLUMN on_conflict text,
      ADD CONSTRAINT schedules_group_format CHECK (group_key ~ '^[!-~]{1,128}$'),
      ADD CONSTRAINT schedules_timeout_ms CHECK (timeout_ms BETWEEN 1000 AND 604800000),
      ADD CONSTRAINT schedules_expires_in_ms CHECK (expires_in_ms BETWEEN 0 AND 315360000000),
      ADD CONSTRAINT schedules_unique_key CHECK (char_length(unique_key) BETWEEN 1 AND 255),
      ADD CONSTRAINT schedules_on_conflict CHECK (
        (unique_key IS NULL) = (on_conflict IS NULL) AND on_conflict IN ('keep', 'replace'))`.execute(db);
  await sql`
    UPDATE baton.schedules
    SET file_spec = file_spec || '{"group": null, "timeout_ms": null, "expires_in_ms": null,
                                   "unique_key": null, "on_conflict": null}'::jsonb
    WHERE file_spec IS NOT NULL`.execute(db);
}

export async function down(db: Kysely<any>): Promise<void> {
  await sql`
    UPDATE baton.schedules
    SET file_spec = file_spec - 'group' - 'timeout_ms' - 'expires_in_ms' - 'unique_key' - 'on_conflict'
    WHERE file_spec IS NOT NULL`.execute(db);
  await sql`
    ALTER TABLE baton.schedules
      DROP COLUMN IF EXISTS on_conflict,
      DROP COLUMN IF EXISTS unique_key,
      DROP COLUMN IF EXISTS expires_in_ms,
      DROP COLUMN IF EXISTS timeout_ms,
      DROP COLUMN IF EXISTS group_key`.execute(db);
}
