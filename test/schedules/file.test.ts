import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import type { BatonApp } from '../../src/app.js';
import { createTestApp, loadStartup, useTestApp } from '../support/app.js';
import { useTestDatabase } from '../support/database.js';
import { api } from '../support/http.js';

const database = useTestDatabase();
const app = useTestApp(database);
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'baton-schedules-'));

function writeFile(name: string, text: string): string {
  const file = path.join(dir, name);
  fs.writeFileSync(file, text);
  return file;
}

/** Start a replica with this schedules file (it applies the file when ready), then stop it. */
async function startWith(file: string): Promise<void> {
  const replica: BatonApp = await createTestApp(database, { BATON_SCHEDULES_FILE: file });
  await replica.close();
}

const get = async (name: string) => (await api(app).call('GET', `/v1/schedules/${name}`)).body;

const yaml = (payload: string, extra = '') => `
# The team's schedules, kept in its repository.
schedules:
  report:
    queue: reports
    cron: "30 2 * * *"
    timezone: Europe/Berlin
    payload: ${payload}
${extra}`;

describe('BATON_SCHEDULES_FILE', () => {
  it('a bad file stops start-up, naming the variable, the schedule and the field', () => {
    const cases: [string, string, RegExp][] = [
      [
        'bad-cron.yaml',
        'schedules:\n  x: { queue: q, cron: "61 * * * *" }\n',
        /BATON_SCHEDULES_FILE schedules\.x\.cron is not a cron/,
      ],
      [
        'bad-tz.yaml',
        'schedules:\n  x: { queue: q, cron: "@daily", timezone: Nowhere/Land }\n',
        /schedules\.x\.timezone is not an IANA/,
      ],
      [
        'offset-tz.yaml',
        'schedules:\n  x: { queue: q, cron: "@daily", timezone: "+02:00" }\n',
        /schedules\.x\.timezone is not an IANA/,
      ],
      [
        'lower-tz.yaml',
        'schedules:\n  x: { queue: q, cron: "@daily", timezone: europe/paris }\n',
        /schedules\.x\.timezone is not an IANA/,
      ],
      [
        'bad-field.yaml',
        'schedules:\n  x: { queue: q, cron: "@daily", every: 5 }\n',
        /schedules\.x\.every is not a known field/,
      ],
      [
        'bad-overlap.json',
        '{"schedules": {"x": {"queue": "q", "cron": "@daily", "overlap": "maybe"}}}',
        /schedules\.x\.overlap must be one of allow, skip/,
      ],
      ['bad-yaml.yaml', 'schedules: [unclosed', /BATON_SCHEDULES_FILE is not valid YAML/],
      [
        'dup.yaml',
        'schedules:\n  x: { queue: q, cron: "@daily" }\n  x: { queue: q, cron: "@hourly" }\n',
        /not valid YAML/,
      ],
      ['never.yaml', 'schedules:\n  x: { queue: q, cron: "0 0 30 2 *" }\n', /schedules\.x\.cron never fires/],
    ];
    for (const [name, text, message] of cases) {
      expect(() => loadStartup({ BATON_SCHEDULES_FILE: writeFile(name, text) }), name).toThrow(message);
    }
    expect(() => loadStartup({ BATON_SCHEDULES_FILE: path.join(dir, 'missing.yaml') })).toThrow(
      /BATON_SCHEDULES_FILE cannot be read/,
    );
  });

  it('is applied on every start, idempotently; the file’s changes reach unchanged schedules', async () => {
    const file = writeFile('a.yaml', yaml('{ v: 1 }'));
    await startWith(file);
    const first = await get('report');
    expect(first).toMatchObject({ queue: 'reports', payload: { v: 1 }, source: 'file', drifted: false });
    await startWith(file);
    expect(await get('report')).toEqual(first);
    writeFile('a.yaml', yaml('{ v: 2 }'));
    await startWith(file);
    expect(await get('report')).toMatchObject({ payload: { v: 2 }, source: 'file', drifted: false });
    // The pending occurrence is kept: only the payload changed.
    expect((await get('report')).next_run_at).toBe(first.next_run_at);
  });

  it('a schedule the API changed is reported as drifted and not overwritten; DELETE hands it back to the file', async () => {
    const file = writeFile('b.yaml', yaml('{ v: 1 }'));
    await startWith(file);
    await api(app).call('PUT', '/v1/schedules/report', {
      queue: 'reports',
      cron: '45 3 * * *',
      payload: { v: 'api' },
    });
    expect(await get('report')).toMatchObject({ cron: '45 3 * * *', source: 'file', drifted: true });
    writeFile('b.yaml', yaml('{ v: 3 }'));
    await startWith(file);
    expect(await get('report')).toMatchObject({ cron: '45 3 * * *', payload: { v: 'api' }, drifted: true });
    // Pausing is a change too: a restart must not silently resume a schedule paused in an incident.
    await api(app).call('DELETE', '/v1/schedules/report');
    await startWith(file);
    expect(await get('report')).toMatchObject({ cron: '30 2 * * *', payload: { v: 3 }, drifted: false });
    await api(app).call('POST', '/v1/schedules/report/pause');
    await startWith(file);
    expect(await get('report')).toMatchObject({ paused: true, drifted: true });
    // Putting back exactly the file's definition ends the drift.
    await api(app).call('POST', '/v1/schedules/report/resume');
    expect(await get('report')).toMatchObject({ paused: false, drifted: false });
  });

  it('a schedule taken out of the file is deleted, unless it drifted: then it stays, as an API schedule', async () => {
    const extra =
      '  hourly:\n    queue: reports\n    cron: "@hourly"\n  tweaked:\n    queue: reports\n    cron: "@daily"\n';
    const file = writeFile('c.yaml', yaml('{ v: 1 }', extra));
    await startWith(file);
    await api(app).call('PUT', '/v1/schedules/tweaked', { queue: 'reports', cron: '@weekly' });
    writeFile('c.yaml', yaml('{ v: 1 }'));
    await startWith(file);
    expect((await api(app).call('GET', '/v1/schedules/hourly')).status).toBe(404);
    expect(await get('tweaked')).toMatchObject({ cron: '@weekly', source: 'api', drifted: false });
  });

  it('an API schedule with the same name is adopted only when identical; otherwise it is drifted', async () => {
    await api(app).call('PUT', '/v1/schedules/same', { queue: 'reports', cron: '@daily' });
    await api(app).call('PUT', '/v1/schedules/different', { queue: 'reports', cron: '@weekly' });
    const file = writeFile(
      'd.json',
      JSON.stringify({
        schedules: {
          same: { queue: 'reports', cron: '@daily' },
          different: { queue: 'reports', cron: '@daily' },
        },
      }),
    );
    await startWith(file);
    expect(await get('same')).toMatchObject({ source: 'file', drifted: false });
    expect(await get('different')).toMatchObject({ cron: '@weekly', source: 'api' });
  });

  it('replicas starting at once with the same file apply it once, without errors', async () => {
    const file = writeFile('e.yaml', 'schedules:\n  together: { queue: reports, cron: "@daily" }\n');
    const replicas = await Promise.all(
      Array.from({ length: 4 }, () => createTestApp(database, { BATON_SCHEDULES_FILE: file })),
    );
    await Promise.all(replicas.map((r) => r.close()));
    expect(await get('together')).toMatchObject({ source: 'file', drifted: false });
  });
});
