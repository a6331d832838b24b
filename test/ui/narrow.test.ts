import { sql } from 'kysely';
import type { Page } from 'playwright-core';
import { beforeAll, describe, expect, it } from 'vitest';
import { GroupStatsDuty } from '../../src/maintenance/group-stats.js';
import { seedHourOfHistory } from './history-seed.js';
import { eventually, SECRETS, useDashboard, WALK } from './walk.js';

/**
 * Every page in an 800 px wide window (a laptop's half screen, a tablet): nothing scrolls sideways,
 * neither the page nor a table in its scrolling region. The data is what a busy system shows: long
 * queue, group, worker and schedule names, four-digit counts, long error messages.
 */
const { database, asOps, openPage, signIn, server } = useDashboard();

const QUEUE = 'thumbnail-renders-eu-west';
const GROUP = 'customer:acme-industries-4242';
const WORKER = 'render-box-07.eu-west-1.internal:31337';
const MESSAGE =
  'ImageMagick convert exited with status 1: convert-im6.q16: width or height exceeds limit ' +
  '`/tmp/render-8f3a1c2e/source.tiff` @ error/cache.c/OpenPixelCache/3909';
let deadJob = '';

beforeAll(async () => {
  for (const queue of [QUEUE, 'invoice-emails', 'nightly-reports-archive']) {
    const jobs = Array.from({ length: 1200 }, (_, i) => ({
      payload: { n: i },
      priority: i % 7,
      ...(queue === QUEUE ? { group: i % 3 === 0 ? GROUP : `customer:globex-${i % 5}` } : {}),
    }));
    expect((await asOps('POST', `/v1/queues/${queue}/jobs/batch`, { jobs: jobs.slice(0, 600) })).status).toBe(
      201,
    );
    expect((await asOps('POST', `/v1/queues/${queue}/jobs/batch`, { jobs: jobs.slice(600) })).status).toBe(
      201,
    );
    await seedHourOfHistory(database.db, queue);
  }
  await asOps('PUT', `/v1/queues/${QUEUE}`, {
    concurrency_limit: 500,
    group_concurrency_limit: 25,
    group_rate_limit: { limit: 1200, period_ms: 60_000 },
  });
  await asOps('PUT', `/v1/queues/${QUEUE}/groups/${encodeURIComponent(GROUP)}`, {
    weight: 3,
    concurrency_limit: 40,
  });
  const claimed = (await asOps('POST', `/v1/queues/${QUEUE}/claim`, { max_jobs: 30, worker_id: WORKER })).body
    .jobs;
  for (const job of claimed.slice(0, 3)) {
    await asOps('POST', `/v1/jobs/${job.id}/nack`, {
      lease_token: job.lease_token,
      dead: true,
      error: { message: MESSAGE, details: { exit_code: 1, stderr: MESSAGE } },
    });
  }
  deadJob = claimed[0].id;
  await asOps('POST', '/v1/queues/invoice-emails/claim', {
    max_jobs: 12,
    worker_id: 'mailer-3.eu-west-1.internal',
  });
  for (const [name, queue, cron, timezone] of [
    ['nightly-invoice-digest', 'invoice-emails', '30 2 * * 1-5', 'Europe/Amsterdam'],
    ['hourly-thumbnail-cleanup', QUEUE, '0 * * * *', 'America/Argentina/Buenos_Aires'],
  ] as const) {
    expect((await asOps('PUT', `/v1/schedules/${name}`, { queue, cron, timezone })).status).toBe(201);
    await asOps('POST', `/v1/schedules/${name}/trigger`);
  }
  await sql`UPDATE baton.schedules SET last_error = jsonb_build_object('at', to_json(now()) #>> '{}', 'message', ${MESSAGE}::text)
            WHERE name = 'hourly-thumbnail-cleanup'`.execute(database.db);
  await new GroupStatsDuty(database.db).runOnce();
});

/** How wide the page is, and each table against the region it scrolls in. */
const widths = (page: Page) =>
  page.evaluate(() => {
    const document = (globalThis as any).document;
    return {
      page: document.documentElement.scrollWidth as number,
      tables: [...document.querySelectorAll('main table')].map((t: any) => ({
        table: t.caption?.textContent as string,
        width: t.scrollWidth as number,
        room: t.parentElement.clientWidth as number,
      })),
    };
  });

describe('every page at 800 px', WALK, () => {
  it('fits: the page and each of its tables, without scrolling sideways', async () => {
    const { context, page, problems } = await openPage({ width: 800, height: 900 });
    try {
      await signIn(page, SECRETS.ops);
      const overflows: string[] = [];
      const pages: [string, (page: Page) => Promise<unknown>, number][] = [
        ['#/', (p) => p.locator('tbody figure.chart canvas').nth(5).waitFor(), 1],
        [`#/queues/${QUEUE}`, (p) => p.getByRole('rowheader', { name: GROUP }).waitFor(), 2],
        [
          `#/queues/${QUEUE}?state=dead`,
          (p) => p.getByRole('link', { name: deadJob, exact: true }).waitFor(),
          2,
        ],
        [`#/queues/${QUEUE}?state=claimed&order=desc`, (p) => p.locator('td.group').first().waitFor(), 2],
        [
          `#/queues/${QUEUE}/groups/${encodeURIComponent(GROUP)}`,
          (p) => p.getByRole('heading', { name: 'Jobs', exact: true }).waitFor(),
          1,
        ],
        [`#/jobs/${deadJob}`, (p) => p.getByRole('heading', { name: 'Failed attempts' }).waitFor(), 1],
        // Every dead job, ticked: the selection's bar and a long error beside a long queue name.
        [
          '#/jobs?within=all',
          async (p) => {
            await p.getByRole('link', { name: deadJob, exact: true }).waitFor();
            await p.getByLabel('Select every job on this page').check();
          },
          1,
        ],
        ['#/workers', (p) => p.getByRole('row', { name: new RegExp(WORKER) }).waitFor(), 1],
        ['#/schedules', (p) => p.getByRole('row', { name: /hourly-thumbnail-cleanup/ }).waitFor(), 1],
        ['#/schedules/hourly-thumbnail-cleanup', (p) => p.getByTestId('last-error').waitFor(), 0],
      ];
      for (const [hash, loaded, tables] of pages) {
        await page.goto(`${server.url}/ui${hash}`);
        await loaded(page);
        await eventually(async () => (await widths(page)).tables.length).toBeGreaterThanOrEqual(tables);
        const seen = await widths(page);
        if (seen.page > 800) overflows.push(`${hash} is ${seen.page} px wide`);
        for (const t of seen.tables) {
          if (t.width > t.room)
            overflows.push(`${hash}: the table "${t.table}" is ${t.width} px in ${t.room} px`);
        }
      }
      expect(overflows).toEqual([]);
      expect(problems).toEqual([]);
    } finally {
      await context.close();
    }
  });
});
