import { type RawBuilder, sql } from 'kysely';

/**
 * `column` names a queue that a key limited to `patterns` may use: the key's queue patterns as
 * PostgreSQL regular expressions (auth/api-keys.ts, queuePatternsOf), a condition of the statement
 * itself, so another tenant's rows are never read, not merely dropped afterwards. TRUE for a key
 * with no limit (undefined).
 */
export function queueVisible(column: string, patterns: readonly string[] | undefined): RawBuilder<unknown> {
  return patterns === undefined ? sql`TRUE` : sql`${sql.ref(column)} ~ ANY(${patterns}::text[])`;
}
