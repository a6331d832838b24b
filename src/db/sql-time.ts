import { type RawBuilder, sql } from 'kysely';

/**
 * Times written as text by SQL itself (inside JSON, or into a cursor), so that they read exactly as
 * the times JavaScript writes: UTC, `Z`, a fixed number of fraction digits. `timestamptz::text` and
 * `now()` inside jsonb_build_object would follow the session's DateStyle and TimeZone instead
 * (`2026-11-30T07:49:19.08358+00:00`), which strict clients refuse.
 */

/** As the API shows times: milliseconds, like Date.toISOString(). */
export const isoMillis = (expr: RawBuilder<unknown>) =>
  sql<string>`to_char(${expr} AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')`;

/** At PostgreSQL's full precision (microseconds), for keys that must compare exactly. */
export const isoMicros = (expr: RawBuilder<unknown>) =>
  sql<string>`to_char(${expr} AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"')`;
