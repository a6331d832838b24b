import { execFile } from 'node:child_process';
import fs from 'node:fs';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { useListeningApp } from './support/app.js';
import { useTestDatabase } from './support/database.js';
import { freePort } from './support/ports.js';

const run = promisify(execFile);
const database = useTestDatabase();

const SHOWN = '# => ';
// Times differ from run to run; everything else a block prints must be what the README shows.
const TIMESTAMP = /"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)"/g;
const comparable = (line: string) => JSON.parse(line.replace(TIMESTAMP, '"<time>"'));

/** The README and the docs pages it links to: the walk-throughs are spread over them. */
const PAGES = [
  'README.md',
  ...fs
    .readdirSync('docs')
    .filter((f) => f.endsWith('.md'))
    .map((f) => `docs/${f}`),
];

function block(name: string): string {
  const page = PAGES.map((p) => fs.readFileSync(p, 'utf8')).find((t) => t.includes(`<!-- ${name}:start -->`));
  if (!page) throw new Error(`no walk-through block ${name} in ${PAGES.join(', ')}`);
  const text = page.split(`<!-- ${name}:start -->`)[1]!.split(`<!-- ${name}:end -->`)[0]!;
  return text.replace(/^\s*```sh\n/, '').replace(/```\s*$/, '');
}

/**
 * The curl blocks of the README and its docs pages, run as written against a real listening server,
 * in the order a reader follows them (the README's walk-through first, then the pages in the order
 * below) on one database, as on a fresh server: the ids shown depend on it.
 */
describe('README walk-through', () => {
  const server = useListeningApp(database);

  // Push delivery (docs/push.md) to a receiver on this machine: a second server on the same database
  // that delivers (no leader, as for the first: the block waits for its receiver before enqueuing).
  const pushing = useListeningApp(database, { BATON_PUSH: 'true', BATON_PUSH_ALLOW: '*,127.0.0.1' });

  async function runBlock(name: string, env: Record<string, string> = {}) {
    const script = block(name);
    const { stdout } = await run('bash', ['-euo', 'pipefail', '-c', script], {
      env: { ...process.env, BATON_URL: server.url, ...env },
    });
    const printed = stdout.trim().split('\n');
    const shown = script
      .split('\n')
      .filter((l) => l.startsWith(SHOWN))
      .map((l) => l.slice(SHOWN.length));
    return { printed, shown };
  }

  it('runs every command of the job walk-through; each prints what the README shows under it', async () => {
    const started = Date.now();
    const { printed, shown } = await runBlock('walkthrough');
    expect(shown).toHaveLength(8);
    expect(printed.map(comparable)).toEqual(shown.map(comparable));
    // The renewal moved the lease's expiry forward; the nack scheduled a retry (state "scheduled",
    // compared above) at a time after the walk-through began. Not against the clock once it has
    // ended: the commands after the nack may take longer than the retry's backoff on a loaded machine.
    const [claimed, renewed, nacked] = [printed[1]!, printed[2]!, printed[5]!].map((l) => JSON.parse(l));
    expect(Date.parse(renewed.lease_expires_at)).toBeGreaterThanOrEqual(Date.parse(claimed.lease_expires_at));
    expect(Date.parse(nacked.run_at)).toBeGreaterThan(started);
  });

  it('runs every command of "Operating Baton"; each prints what the README shows under it', async () => {
    const { printed, shown } = await runBlock('operating');
    expect(shown).toHaveLength(14);
    expect(printed.map(comparable)).toEqual(shown.map(comparable));
  });

  it('runs every command of "Cron schedules"; each prints what the README shows under it', async () => {
    const { printed, shown } = await runBlock('schedules');
    expect(shown).toHaveLength(8);
    expect(printed.map(comparable)).toEqual(shown.map(comparable));
    // 02:30 in Berlin is 00:30 or 01:30 UTC, by season; the trigger was the last run.
    const created = JSON.parse(printed[0]!);
    expect(created.next_run_at).toMatch(/T0[01]:30:00\.000Z$/);
    const read = JSON.parse(printed[3]!);
    expect(Math.abs(Date.parse(read.last_run_at) - Date.now())).toBeLessThan(60_000);
  });

  it('runs every command of "Flow control"; each prints what the README shows under it', async () => {
    const { printed, shown } = await runBlock('flow');
    expect(shown).toHaveLength(8);
    expect(printed.map(comparable)).toEqual(shown.map(comparable));
  });

  it('runs every command of "Ack and claim in one request"; each prints what the README shows under it', async () => {
    const { printed, shown } = await runBlock('ack-and-claim');
    expect(shown).toHaveLength(2);
    expect(printed.map(comparable)).toEqual(shown.map(comparable));
  });

  it('runs every command of "Await a result, and report progress"; each prints what the README shows', async () => {
    const { printed, shown } = await runBlock('await');
    expect(shown).toHaveLength(3);
    expect(printed.map(comparable)).toEqual(shown.map(comparable));
  });

  it('runs every command of "Deadlines, expiry and unique jobs"; each prints what the README shows', async () => {
    const { printed, shown } = await runBlock('time');
    expect(shown).toHaveLength(7);
    expect(printed.map(comparable)).toEqual(shown.map(comparable));
  });

  it('runs every command of "Workflows"; each prints what the README shows under it', async () => {
    const { printed, shown } = await runBlock('workflows');
    expect(shown).toHaveLength(10);
    expect(printed.map(comparable)).toEqual(shown.map(comparable));
  });

  it('runs every command of "Push queues"; each prints what the page shows under it', async () => {
    const { printed, shown } = await runBlock('push', {
      BATON_URL: pushing.url,
      RECEIVER_PORT: String(await freePort()),
    });
    expect(shown).toHaveLength(2);
    expect(printed.map(comparable)).toEqual(shown.map(comparable));
  });
});
