import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { parseTimestamptz, TIMESTAMPTZ_OID } from '../../src/db/timestamp-parser.js';
import { useTestDatabase } from '../support/database.js';

/**
 * The server reads timestamptz with its own parser (faster on the hot paths). It must answer the
 * same Date as node-postgres's own parser for whatever PostgreSQL prints, in any session time zone.
 */
const database = useTestDatabase();
const pgParse = pg.types.getTypeParser(TIMESTAMPTZ_OID, 'text') as (text: string) => Date;

const VALUES = [
  'now()',
  'clock_timestamp()',
  "'2026-11-30 12:16:32+00'",
  "'2026-11-30 12:16:32.1+00'",
  "'2026-11-30 12:16:32.12+00'",
  "'2026-11-30 12:16:32.123+00'",
  "'2026-11-30 12:16:32.1234+00'",
  "'2026-11-30 12:16:32.999999+00'",
  "'2024-02-29 23:59:59.000001+00'",
  "'1970-01-01 00:00:00+00'",
  "'1969-12-31 23:59:59.5+00'",
  "'0099-06-01 00:00:00+00'",
  "'0001-01-01 00:00:00+00'",
  "'0044-03-15 12:00:00+00 BC'",
  "'9999-12-31 23:59:59.999999+00'",
  "'12000-01-01 00:00:00+00'",
  "'infinity'",
  "'-infinity'",
];

describe('timestamptz parser', () => {
  for (const zone of ['UTC', 'Asia/Kolkata', 'America/St_Johns', 'Europe/Amsterdam']) {
    it(`reads what PostgreSQL prints in time zone ${zone} as pg's own parser does`, async () => {
      const client = await database.pool.connect();
      try {
        await client.query(`SET TIME ZONE '${zone}'`);
        const { rows } = await client.query<{ t: string }>(
          `SELECT v::timestamptz::text AS t FROM unnest(ARRAY[${VALUES.join(',')}]::timestamptz[]) AS v`,
        );
        expect(rows).toHaveLength(VALUES.length);
        for (const { t } of rows) {
          const ours = parseTimestamptz(t);
          const theirs = pgParse(t);
          expect(ours instanceof Date ? ours.getTime() : ours, t).toEqual(
            theirs instanceof Date ? theirs.getTime() : theirs,
          );
        }
      } finally {
        await client.query('RESET TIME ZONE');
        client.release();
      }
    });
  }

  it('agrees with pg on random instants over four centuries, at every fraction length', () => {
    for (let i = 0; i < 20_000; i++) {
      const ms = Math.floor((Math.random() - 0.5) * 2 * 12_000_000_000_000);
      const iso = new Date(ms).toISOString();
      const micros = String(Math.floor(Math.random() * 1_000_000)).padStart(6, '0');
      const digits = micros.slice(0, i % 7).replace(/0+$/, '');
      const text = `${iso.slice(0, 10)} ${iso.slice(11, 19)}${digits ? `.${digits}` : ''}+00`;
      expect(parseTimestamptz(text).getTime(), text).toBe(pgParse(text).getTime());
    }
  });
});
