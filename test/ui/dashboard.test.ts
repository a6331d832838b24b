import fs from 'node:fs/promises';
import type { BrowserContext, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { refreshFinishedStats } from '../../src/maintenance/queue-stats.js';
import { useListeningApp } from '../support/app.js';
import { seedHourOfHistory } from './history-seed.js';
import { eventually, SECRETS, useDashboard, WALK, XSS } from './walk.js';

/**
 * The walk an operator takes, in headless Chromium against a real server (with a maintenance
 * leader counting every 200 ms) and a real PostgreSQL. The pages are built from ui/ on the first
 * request, as `npm start` does. `npm run screenshots` also writes the screenshots in docs/.
 * Groups and schedules have their own walk: flow-pages.test.ts.
 */
// The push queue's endpoint below is a documentation address, refused unless named (src/push/allow-list.ts).
const { database, server, call, asOps, openPage, signIn, shot } = useDashboard({
  BATON_PUSH_ALLOW: '*,203.0.113.10',
});

describe('the dashboard, with an admin key', WALK, () => {
  let context: BrowserContext;
  let page: Page;
  let problems: string[];
  let deadJob: string;
  beforeAll(async () => {
    ({ context, page, problems } = await openPage());
  });
  afterAll(() => context?.close());

  it('shows only a login until a key works, and keeps the key out of URLs and cookies', async () => {
    const apiCalls: string[] = [];
    page.on('request', (r) => {
      if (new URL(r.url()).pathname.startsWith('/v1/')) apiCalls.push(r.url());
    });
    await page.goto(`${server.url}/`);
    expect(new URL(page.url()).pathname).toBe('/ui');
    await page.getByLabel('API key').waitFor();
    expect(await page.locator('main').textContent()).not.toMatch(/queue/i);
    expect(apiCalls).toEqual([]);

    await signIn(page, SECRETS.ops);
    await eventually(() => page.locator('header').textContent()).toContain('signed in as ops (admin)');
    expect(apiCalls.length).toBeGreaterThan(0);
    expect(apiCalls.join()).not.toContain(SECRETS.ops);
    expect(page.url()).not.toContain(SECRETS.ops);
    expect(await context.cookies()).toEqual([]);
    expect(await page.evaluate(() => sessionStorage.getItem('baton.apiKey'))).toBe(SECRETS.ops);
  });

  it('shows a queue once a job is enqueued to it', async () => {
    await page.getByText('No queues yet').waitFor();
    expect(
      (await asOps('POST', '/v1/queues/emails/jobs', { payload: { to: 'ada@example.com' } })).status,
    ).toBe(201);
    const row = page.getByRole('row', { name: /emails/ });
    await row.waitFor({ timeout: 10_000 });
    await eventually(() => row.getByRole('cell').first().textContent()).toBe('1');
  });

  it('filters the queue’s jobs to dead ones and opens one: payload and error are shown as text', async () => {
    await asOps('POST', '/v1/queues/emails/jobs', { payload: { html: XSS }, priority: 10 });
    const claim = await asOps('POST', '/v1/queues/emails/claim', { worker_id: 'mailer-7' });
    const [job] = claim.body.jobs;
    deadJob = job.id;
    const renewed = await asOps('POST', `/v1/jobs/${job.id}/renew`, {
      lease_token: job.lease_token,
      progress: { sent: 0, of: 1 },
    });
    expect(renewed.status).toBe(200);
    const nack = await asOps('POST', `/v1/jobs/${job.id}/nack`, {
      lease_token: job.lease_token,
      dead: true,
      error: { message: '<b>smtp said no</b>', details: { code: 550 } },
    });
    expect(nack.body.state).toBe('dead');

    await page.getByRole('link', { name: 'emails', exact: true }).click();
    await page.getByRole('heading', { name: 'Queue emails' }).waitFor();
    await page.getByLabel('State').selectOption('dead');
    expect(page.url()).toContain('state=dead');
    await page.getByRole('link', { name: deadJob, exact: true }).click();
    await page.getByRole('heading', { name: `Job ${deadJob}` }).waitFor();

    const payload = page.getByTestId('payload');
    await eventually(() => payload.textContent()).toContain(XSS.replaceAll('"', '\\"'));
    expect(await page.locator('main').textContent()).toContain('<b>smtp said no</b>');
    expect(await page.locator('main script, main img, main b').count()).toBe(0);
    expect(await page.evaluate(() => (globalThis as { __pwned?: number }).__pwned)).toBeUndefined();
    expect(await page.locator('main').textContent()).toContain('mailer-7');
    // The worker's last progress report, kept when the job went dead.
    expect(JSON.parse((await page.getByTestId('progress').textContent()) ?? '')).toEqual({ sent: 0, of: 1 });
  });

  it('redrives the dead job after a confirmation naming it, and sees it move to ready', async () => {
    await page.getByRole('button', { name: `Redrive job ${deadJob}` }).click();
    const dialog = page.getByRole('dialog', { name: `Redrive job ${deadJob}?` });
    await dialog.waitFor();
    expect(await dialog.textContent()).toMatch(/goes back to ready.*\(1 job/);
    await dialog.getByRole('button', { name: `Redrive job ${deadJob}` }).click();
    await page.getByRole('status').getByText(`Job ${deadJob} redriven to ready.`).waitFor();
    await page.getByRole('heading', { name: `Job ${deadJob} ready` }).waitFor();
    expect((await asOps('GET', `/v1/jobs/${deadJob}`)).body.state).toBe('ready');
  });

  it('pauses the queue after a confirmation with its counts; claims stop until it is resumed', async () => {
    await page.getByRole('link', { name: 'emails', exact: true }).click();
    await page.getByRole('heading', { name: 'Queue emails' }).waitFor();
    await eventually(async () => (await asOps('GET', '/v1/queues/emails')).body.stats.ready).toBe(2);
    await eventually(() => page.getByRole('region', { name: /^Now, as of/ }).textContent()).toMatch(
      /Ready\s*2/,
    );

    await page.getByRole('button', { name: 'Pause queue emails' }).click();
    const dialog = page.getByRole('dialog', { name: 'Pause queue emails?' });
    expect(await dialog.textContent()).toContain('2 ready jobs will wait');
    await dialog.getByRole('button', { name: 'Pause emails' }).click();
    await page.getByRole('heading', { name: 'Queue emails paused' }).waitFor();
    expect((await asOps('POST', '/v1/queues/emails/claim', { max_jobs: 10 })).body.jobs).toEqual([]);

    await page.getByRole('button', { name: 'Resume queue emails' }).click();
    await page.getByRole('dialog').getByRole('button', { name: 'Resume emails' }).click();
    await page.getByRole('heading', { name: 'Queue emails', exact: true }).waitFor();
    const claimed = await asOps('POST', '/v1/queues/emails/claim', { max_jobs: 10, worker_id: 'mailer-8' });
    expect(claimed.body.jobs).toHaveLength(2);
  });

  it('keyboard: a new page puts focus on its heading; a confirmation takes focus, and Escape gives it back', async () => {
    const focused = () => page.evaluate(() => (globalThis as any).document.activeElement?.textContent);
    await page.getByRole('link', { name: 'Queues' }).click();
    await eventually(focused).toBe('Queues');
    await page.getByRole('link', { name: 'emails', exact: true }).click();
    await eventually(focused).toMatch(/^Queue emails/);
    // The heading takes focus for keyboard and screen-reader users, without a focus ring (not a control).
    expect(
      await page.evaluate(() => {
        const g = globalThis as any;
        return g.getComputedStyle(g.document.activeElement).outlineStyle;
      }),
    ).toBe('none');

    const pause = page.getByRole('button', { name: 'Pause queue emails' });
    await pause.focus();
    await page.keyboard.press('Enter');
    await page.getByRole('dialog').waitFor();
    expect(await focused()).toBe('Back');
    await page.keyboard.press('Escape');
    await page.getByRole('dialog').waitFor({ state: 'detached' });
    expect(
      await page.evaluate(() => (globalThis as any).document.activeElement?.getAttribute('aria-label')),
    ).toBe('Pause queue emails');
    expect((await asOps('GET', '/v1/queues/emails')).body.paused).toBe(false);
  });

  it('shows a claimed job’s budget, deadline, expiry and unique key', async () => {
    const enq = await asOps('POST', '/v1/queues/timed/jobs', {
      payload: { report: 7 },
      timeout_ms: 90_000,
      expires_in_ms: 3_600_000,
      unique_key: 'report-7',
    });
    expect(enq.status).toBe(201);
    const claim = await asOps('POST', '/v1/queues/timed/claim', { worker_id: 'reporter-1' });
    const job = claim.body.jobs[0];
    expect(job.deadline_at).toEqual(expect.any(String));
    await page.goto(`${server.url}/ui#/jobs/${job.id}`);
    await page.getByRole('heading', { name: `Job ${job.id}` }).waitFor();
    const facts = page.locator('dl.settings').first();
    await eventually(() => facts.textContent()).toContain('Attempt deadline');
    const text = (await facts.textContent()) ?? '';
    expect(text).toContain('Budget per attempt90 s');
    expect(text).toContain('Expires unless claimed by');
    expect(text).toContain('Unique keyreport-7');
  });

  it('takes the screenshots of docs/screenshots', async () => {
    for (const queue of ['emails', 'reports', 'thumbnails']) {
      await asOps('POST', `/v1/queues/${queue}/jobs/batch`, {
        jobs: Array.from({ length: 12 }, (_, i) => ({ payload: { n: i } })),
      });
      await seedHourOfHistory(database.db, queue);
    }
    await page.getByRole('link', { name: 'Queues' }).click();
    const thumbnails = page.getByRole('row', { name: /thumbnails/ });
    await eventually(() => thumbnails.getByRole('cell').first().textContent()).toBe('12');
    await page.locator('tbody figure.chart canvas').nth(5).waitFor();
    await page.screenshot({ path: shot('overview.png') });

    await page.getByRole('link', { name: 'reports', exact: true }).click();
    await page.getByRole('heading', { name: 'Queue reports' }).waitFor();
    await page.locator('.charts canvas').nth(1).waitFor();
    await page.screenshot({ path: shot('queue.png'), fullPage: true });

    await page.goto(`${server.url}/ui#/jobs/${deadJob}`);
    await page.getByRole('heading', { name: `Job ${deadJob}` }).waitFor();
    await page.getByRole('heading', { name: 'Failed attempts' }).waitFor();
    await page.screenshot({ path: shot('job.png'), fullPage: true });

    const phone = await openPage({ width: 390, height: 844 });
    await signIn(phone.page, SECRETS.ops);
    await phone.page.getByRole('row', { name: /thumbnails/ }).waitFor();
    await phone.page.locator('tbody figure.chart canvas').nth(5).waitFor();
    await phone.page.screenshot({ path: shot('overview-phone.png') });
    expect(phone.problems).toEqual([]);
    await phone.context.close();
    for (const name of ['overview.png', 'queue.png', 'job.png', 'overview-phone.png']) {
      expect((await fs.stat(shot(name))).size, name).toBeGreaterThan(10_000);
    }
  });

  it('shows a workflow job’s parents and children with their states, and counts waiting jobs', async () => {
    const enq = await asOps('POST', '/v1/queues/media/jobs/batch', {
      jobs: [
        { payload: { step: 'extract' } },
        { payload: { step: 'resize' }, depends_on: [{ item: 0 }] },
        { payload: { step: 'publish' }, depends_on: [{ item: 0 }, { item: 1 }] },
      ],
    });
    expect(enq.status).toBe(201);
    const [extract, resize, publish] = enq.body.jobs.map((j: { id: string }) => j.id);
    await page.goto(`${server.url}/ui#/jobs/${resize}`);
    await page.getByRole('heading', { name: `Job ${resize}` }).waitFor();
    const parents = page.getByRole('list', { name: 'Parents' });
    await eventually(() => parents.textContent()).toContain(`Job ${extract}`);
    expect(await parents.textContent()).toContain('ready');
    const children = page.getByRole('list', { name: 'Children' });
    expect(await children.textContent()).toContain(`Job ${publish}`);
    expect(await children.textContent()).toContain('waiting');
    expect(await page.getByTestId('dependencies').textContent()).toContain('1 not finished');

    // The drawing: every job of the graph a link named by its state, parents above their children.
    const graph = page.locator('figure.job-graph');
    await eventually(() => graph.locator('a[data-job]').count()).toBe(3);
    expect(await graph.getByRole('link', { name: `Job ${extract}, media, ready` }).count()).toBe(1);
    expect(await graph.getByRole('link', { name: `Job ${publish}, media, waiting` }).count()).toBe(1);
    const top = async (id: string) => (await graph.locator(`a[data-job="${id}"] rect`).boundingBox())!.y;
    expect(await top(extract)).toBeLessThan(await top(resize));
    expect(await top(resize)).toBeLessThan(await top(publish));
    expect(await graph.locator('path.graph-edge').count()).toBe(3);
    expect(await graph.locator('figcaption').textContent()).toContain('3 jobs, 3 dependencies');
    expect(await graph.locator(`a[data-job="${resize}"] rect`).getAttribute('class')).toContain('current');

    await page.goto(`${server.url}/ui#/queues/media`);
    const counts = page.locator('section[aria-labelledby="counts-title"]');
    await eventually(() => counts.textContent()).toContain('Waiting for parents2');

    // Run the first step: the drawing follows its state, and a box leads to its job's page.
    await page.goto(`${server.url}/ui#/jobs/${resize}`);
    const [first] = (await asOps('POST', '/v1/queues/media/claim', {})).body.jobs;
    expect(first.id).toBe(extract);
    await asOps('POST', `/v1/jobs/${extract}/ack`, { lease_token: first.lease_token });
    await eventually(() =>
      graph.getByRole('link', { name: `Job ${extract}, media, completed` }).count(),
    ).toBe(1);
    await graph.screenshot({ path: shot('job-graph.png') });
    await graph.getByRole('link', { name: new RegExp(`^Job ${publish},`) }).click();
    await page.getByRole('heading', { name: `Job ${publish}` }).waitFor();
  });

  it("shows a push queue's endpoint on its page, and never its secret", async () => {
    // A documentation address, allowed by name for this server (above); nothing is ever sent to it.
    const made = await asOps('PUT', '/v1/queues/webhooks/push', {
      url: 'https://203.0.113.10/hooks',
      concurrency: 4,
    });
    expect(made.status).toBe(201);
    await page.goto(`${server.url}/ui#/queues/webhooks`);
    const section = page.locator('section[aria-labelledby="push-title"]');
    await eventually(() => section.textContent()).toContain('https://203.0.113.10/hooks');
    expect(await section.textContent()).toContain('4 per replica');
    expect(await page.content()).not.toContain(made.body.secret);
    // A queue that is not a push queue has no such section.
    await page.goto(`${server.url}/ui#/queues/media`);
    await page.getByRole('heading', { name: 'Queue media' }).waitFor();
    await page.locator('section[aria-labelledby="settings-title"]').waitFor();
    expect(await page.locator('section[aria-labelledby="push-title"]').count()).toBe(0);
  });

  it('shows who holds leases now: the worker, its queue and jobs, and forgets it once it acks', async () => {
    await asOps('POST', '/v1/queues/renders/jobs/batch', { jobs: [{ payload: 1 }, { payload: 2 }] });
    const claimed = await asOps('POST', '/v1/queues/renders/claim', {
      max_jobs: 2,
      worker_id: 'render-box:42',
    });
    expect(claimed.body.jobs).toHaveLength(2);
    await page.getByRole('link', { name: 'Workers' }).click();
    await page.getByRole('heading', { name: 'Workers' }).waitFor();
    const row = page.getByRole('row', { name: /render-box:42/ });
    await row.waitFor({ timeout: 10_000 });
    expect(await row.getByRole('cell').nth(0).textContent()).toBe('renders');
    expect(await row.getByRole('cell').nth(1).textContent()).toBe('2');
    await asOps('POST', '/v1/jobs/ack', {
      acks: claimed.body.jobs.map((j: { id: string; lease_token: string }) => ({
        id: j.id,
        lease_token: j.lease_token,
      })),
    });
    await row.waitFor({ state: 'detached', timeout: 10_000 });
  });

  it('lists workers that announced themselves, idle or busy, with host, pid, concurrency and the jobs they hold', async () => {
    const hello = { queues: ['renders'], host: 'gpu-7', pid: 311, concurrency: 4, version: 'renderer 3.2' };
    expect((await asOps('PUT', '/v1/workers/renderer-a', hello)).status).toBe(200);
    expect((await asOps('PUT', '/v1/workers/renderer-b', { ...hello, pid: 312 })).status).toBe(200);
    await page.getByRole('link', { name: 'Workers' }).click();
    const table = page.getByRole('table', { name: 'Workers that announced themselves, busiest first' });
    const rowOf = (id: string) => table.getByRole('row', { name: new RegExp(`^${id}`) });
    await eventually(() => rowOf('renderer-a').textContent()).toMatch(
      /idle.*gpu-7, 311.*0 of 4.*renders.*renderer 3\.2/,
    );
    expect(await rowOf('renderer-a').textContent()).not.toMatch(/\bin \d/);

    await asOps('POST', '/v1/queues/renders/jobs', { payload: 'frame' });
    const [job] = (await asOps('POST', '/v1/queues/renders/claim', { worker_id: 'renderer-b' })).body.jobs;
    await eventually(() => rowOf('renderer-b').textContent()).toMatch(/busy.*1 of 4/);
    await rowOf('renderer-b').getByRole('link', { name: job.id, exact: true }).waitFor();
    // Busiest first.
    expect((await table.locator('tbody th').allTextContents())[0]).toBe('renderer-b');
    await asOps('POST', `/v1/jobs/${job.id}/ack`, { lease_token: job.lease_token });
    expect((await asOps('DELETE', '/v1/workers/renderer-a')).status).toBe(200);
    await rowOf('renderer-a').waitFor({ state: 'detached', timeout: 10_000 });
    await eventually(() => rowOf('renderer-b').textContent()).toMatch(/idle/);
    expect(problems).toEqual([]);
  });

  it('answers "is the system healthy" on the first page: totals, the last hour, the queues needing attention', async () => {
    await asOps('POST', '/v1/queues/broken/jobs', { payload: 'bad' });
    const [job] = (await asOps('POST', '/v1/queues/broken/claim', { max_jobs: 1 })).body.jobs;
    await asOps('POST', `/v1/jobs/${job.id}/nack`, {
      lease_token: job.lease_token,
      dead: true,
      error: { message: 'no' },
    });
    // Paused too: that reason is read from the queue itself, where the failure waits for the leader's
    // slower counts (dead jobs, the minute's sample), which test/queues/overview.test.ts covers.
    expect((await asOps('POST', '/v1/queues/broken/pause')).status).toBe(200);
    await page.getByRole('link', { name: 'Queues' }).click();
    const attention = page.getByRole('list', { name: 'Queues needing attention' });
    await eventually(() => attention.textContent()).toMatch(/broken: .*paused/);
    const tiles = page.getByRole('definition');
    expect((await tiles.allTextContents()).length).toBeGreaterThanOrEqual(6);
    // The chart's legend shows the latest minute's values, not "--", while no pointer is over it.
    const legend = page.locator('section.system .u-legend .u-value');
    await eventually(async () => {
      const values = await legend.allTextContents();
      return values.length >= 4 && values.slice(1).every((value) => /^\d/.test(value));
    }).toBe(true);

    // Any job by its id, from the header, whatever its queue or state.
    await page.getByLabel('Find a job by id or key').fill(job.id);
    await page.getByRole('button', { name: 'Find' }).click();
    await page.getByRole('heading', { name: `Job ${job.id}` }).waitFor();
    await eventually(() => page.locator('main').textContent()).toContain('dead');
  });

  it('dates each count: live jobs and those kept in history under their own times, the same figures on every page', async () => {
    // The leader counts finished jobs about once a minute; the walk counts them now rather than wait.
    await refreshFinishedStats(database.db, { olderThanMs: 0 });
    const stats = async (queue: string) => (await asOps('GET', `/v1/queues/${queue}`)).body.stats;
    expect((await stats('broken')).dead).toBe(1);
    const clock = (iso: string) => page.evaluate((at) => new Date(at).toLocaleTimeString('en-GB'), iso);

    await page.getByRole('link', { name: 'broken', exact: true }).first().click();
    await page.getByRole('heading', { name: /^Queue broken/ }).waitFor();
    const kept = page.getByRole('region', { name: /^Kept in history, as of / });
    const live = page.getByRole('region', { name: /^Now, as of / });
    await eventually(async () => (await kept.getByRole('heading').textContent()) ?? '').toBe(
      `Kept in history, as of ${await clock((await stats('broken')).finished_refreshed_at)}`,
    );
    expect(await kept.textContent()).toMatch(/Dead\s*1/);
    expect(await kept.textContent()).toMatch(/Completed\s*\d/);
    expect(await live.getByRole('heading').textContent()).toMatch(/^Now, as of \d\d:\d\d:\d\d$/);
    expect(await live.textContent()).toMatch(/Completed in the last minute\s*\d/);
    expect(await live.textContent()).not.toMatch(/Dead|Cancelled/);

    // The first page: the total of dead jobs is the sum of the queues' rows, under the same time.
    await page.getByRole('link', { name: 'Queues' }).click();
    const table = page.getByRole('table', { name: /^Queues with their jobs/ });
    const rowsDead = () =>
      table
        .locator('tbody tr')
        .evaluateAll((rows) =>
          rows.map((r: any) => Number(r.querySelectorAll('td')[3].textContent.replace(/,/g, ''))),
        );
    const system = page.locator('section.system');
    const totalKept = system.getByRole('region', { name: /^Kept in history, as of / });
    await eventually(async () => {
      const total = Number((await totalKept.getByRole('definition').textContent())?.replace(/,/g, ''));
      const rows = await rowsDead();
      return { total, sum: rows.reduce((n, d) => n + d, 0) };
    }).toEqual({ total: 1, sum: 1 });
    expect(
      await table
        .getByRole('row', { name: /broken/ })
        .getByRole('cell')
        .nth(3)
        .textContent(),
    ).toBe('1');
    // Both read the same counts, dated by the latest of them.
    await eventually(async () => {
      const at = (await totalKept.getByRole('heading').textContent())?.replace('Kept in history, as of ', '');
      return (await page.getByTestId('queue-count-times').textContent())?.includes(
        `dead (kept in history, counted about once a minute) as of ${at}.`,
      );
    }).toBe(true);
  });

  it('follows the system’s dark mode: dark paper, light ink, on every page', async () => {
    const dark = await openPage({ width: 1280, height: 800 }, 'dark');
    try {
      await signIn(dark.page, SECRETS.ops);
      const colours = () =>
        dark.page.evaluate(() => {
          const g = globalThis as any;
          const style = g.getComputedStyle(g.document.querySelector('main'));
          return { ink: style.color, paper: g.getComputedStyle(g.document.documentElement).backgroundColor };
        });
      const luminance = (rgb: string) => {
        const [r, g, b] = rgb.match(/\d+/g)!.map(Number);
        return 0.2126 * r! + 0.7152 * g! + 0.0722 * b!;
      };
      for (const hash of ['#/queues', '#/queues/emails', '#/schedules', '#/workers']) {
        await dark.page.goto(`${server.url}/ui${hash}`);
        await dark.page.locator('main h1').waitFor();
        const { ink, paper } = await colours();
        expect(luminance(paper), `${hash} background ${paper}`).toBeLessThan(60);
        expect(luminance(ink), `${hash} text ${ink}`).toBeGreaterThan(180);
      }
      expect(dark.problems).toEqual([]);
    } finally {
      await dark.context.close();
    }
  });

  it('logged no console error or warning, and threw nothing, on any page', () => {
    expect(problems).toEqual([]);
  });
});

describe('the dashboard, with a key that may not act', WALK, () => {
  it('shows no action, and the API refuses the action anyway', async () => {
    const { context, page, problems } = await openPage();
    try {
      await signIn(page, SECRETS.viewer);
      await eventually(() => page.locator('header').textContent()).toMatch(/signed in as viewer.*read-only/);
      await page.getByRole('link', { name: 'emails', exact: true }).click();
      await page.getByRole('heading', { name: 'Queue emails' }).waitFor();
      await page.getByRole('heading', { name: 'Jobs', exact: true }).waitFor();
      expect(await page.getByRole('button', { name: /pause|resume|redrive|purge|cancel/i }).count()).toBe(0);
      const jobs = page
        .getByRole('region', { name: 'Jobs', exact: true })
        .getByRole('table')
        .getByRole('link');
      await jobs.first().click();
      await page.getByRole('heading', { name: /^Job \d+/ }).waitFor();
      await page.getByRole('heading', { name: 'Payload' }).waitFor();
      expect(await page.getByRole('button', { name: /cancel|redrive/i }).count()).toBe(0);

      const refused = await call(SECRETS.viewer, 'POST', '/v1/queues/emails/pause');
      expect(refused.status).toBe(403);
      expect(refused.body.code).toBe('forbidden');
      expect((await asOps('GET', '/v1/queues/emails')).body.paused).toBe(false);
      expect(problems).toEqual([]);
    } finally {
      await context.close();
    }
  });
});

describe('the dashboard, with a wrong key', WALK, () => {
  it('says so and stays on the login; the browser logs only the refused request', async () => {
    const { context, page, problems } = await openPage();
    try {
      await page.goto(`${server.url}/ui`);
      await page.getByLabel('API key').fill('not-a-key');
      await page.getByRole('button', { name: 'Sign in' }).click();
      await page.getByRole('alert').getByText('The server does not accept this key.').waitFor();
      expect(await page.evaluate(() => sessionStorage.length)).toBe(0);
      // Chromium reports every refused fetch on its console, whatever the page does with it.
      expect(problems).toEqual([
        'console.error: Failed to load resource: the server responded with a status of 401 (Unauthorized)',
      ]);
    } finally {
      await context.close();
    }
  });
});

describe('the dashboard of a server without keys (loopback only)', WALK, () => {
  const open = useListeningApp(database, { BATON_MAINTENANCE: 'false' });

  it('asks for no key, says that anyone who reaches the server may act, and offers the actions', async () => {
    const { context, page, problems } = await openPage();
    try {
      await page.goto(`${open.url}/`);
      await page.getByRole('heading', { name: 'Queues' }).waitFor();
      await eventually(() => page.locator('header').textContent()).toContain('no API keys configured');
      await page.getByRole('link', { name: 'emails', exact: true }).click();
      await page.getByRole('button', { name: 'Pause queue emails' }).waitFor();
      expect(await page.evaluate(() => sessionStorage.length)).toBe(0);
      expect(problems).toEqual([]);
    } finally {
      await context.close();
    }
  });
});
