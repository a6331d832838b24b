import fs from 'node:fs/promises';
import { sql } from 'kysely';
import type { BrowserContext, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { GroupStatsDuty } from '../../src/maintenance/group-stats.js';
import { eventually, SECRETS, useDashboard, WALK, XSS } from './walk.js';

/**
 * The dashboard's pages for flow control (a queue's groups, a group's own page, the job browser's
 * group filter) and cron schedules, walked in headless Chromium like dashboard.test.ts. Group counts
 * are the leader's (every 5 s): the walk runs the leader's group-stats duty itself when it needs
 * fresh counts, as the leader would, rather than waiting for it.
 */
const { database, call, asOps, openPage, signIn, server, shot } = useDashboard();

/** A group name is any printable ASCII without spaces, so it can be markup, and has "/" in it. */
const XSS_GROUP = '<script>window.__pwned=3</script>';

const countGroups = () => new GroupStatsDuty(database.db).runOnce();
const enqueue = (queue: string, jobs: { group?: string; payload?: unknown }[]) =>
  asOps('POST', `/v1/queues/${queue}/jobs/batch`, {
    jobs: jobs.map((j, i) => ({ payload: { n: i }, ...j })),
  });
const times = <T>(n: number, value: T): T[] => Array.from({ length: n }, () => value);
const groupPath = (queue: string, group: string) => `/v1/queues/${queue}/groups/${encodeURIComponent(group)}`;
const readyIds = async (queue: string, group?: string) => {
  const query = group === undefined ? '' : `&group=${encodeURIComponent(group)}`;
  const { body } = await asOps('GET', `/v1/queues/${queue}/jobs?state=ready&limit=500${query}`);
  return (body.jobs as { id: string }[]).map((j) => j.id);
};
/** Each row's header cell of a table (its first column), its parts joined by spaces: "purge-temp paused". */
const rowHeaders = (page: Page, table: string) =>
  page
    .getByRole('table', { name: table })
    .locator('tbody th')
    .evaluateAll((cells) => cells.map((c) => [...c.childNodes].map((n) => n.textContent).join(' ')));
const groupLink = (page: Page, queue: string, group: string) =>
  page
    .getByRole('table', { name: `Groups of ${queue}, busiest first` })
    .getByRole('link', { name: group, exact: true });
const nothingRan = async (page: Page) => {
  expect(await page.locator('main script, main img').count()).toBe(0);
  expect(await page.evaluate(() => (globalThis as { __pwned?: number }).__pwned)).toBeUndefined();
};

beforeAll(async () => {
  const limits = await asOps('PUT', '/v1/queues/renders', {
    concurrency_limit: 50,
    rate_limit: { limit: 1000, period_ms: 60_000 },
    group_concurrency_limit: 10,
    group_rate_limit: { limit: 600, period_ms: 60_000 },
  });
  expect(limits.status).toBeLessThan(300);
  const enqueued = await enqueue('renders', [
    ...times(5, { group: 'customer:big' }),
    ...times(2, { group: XSS_GROUP, payload: { html: XSS } }),
    { group: 'customer:small' },
    {},
  ]);
  expect(enqueued.status).toBe(201);
  expect((await asOps('PUT', groupPath('renders', 'customer:big'), { weight: 3 })).status).toBe(200);
  await countGroups();
});

describe('groups and schedules, with an admin key', WALK, () => {
  let context: BrowserContext;
  let page: Page;
  let problems: string[];
  beforeAll(async () => {
    ({ context, page, problems } = await openPage());
    await signIn(page, SECRETS.ops);
  });
  afterAll(() => context?.close());

  it('shows a grouped queue’s groups busiest first, with the limits in effect, and the queue’s limits', async () => {
    await page.getByRole('link', { name: 'renders', exact: true }).click();
    await page.getByRole('heading', { name: 'Groups' }).waitFor();
    // 5 ready, then 2, then the two groups of 1 by name ('' for the jobs without a group first).
    await eventually(() => rowHeaders(page, 'Groups of renders, busiest first')).toEqual([
      'customer:big',
      XSS_GROUP,
      '(no group)',
      'customer:small',
    ]);
    const big = page.getByRole('row', { name: /^customer:big/ });
    expect(await big.getByRole('cell').allTextContents()).toEqual([
      '5',
      '0',
      '0',
      '10 at once',
      '600 per 1 min',
      '3 (own)',
      'Pause',
    ]);
    const settings = page.locator('section', { has: page.getByRole('heading', { name: 'Settings' }) });
    const text = await settings.textContent();
    expect(text).toContain('Concurrency limit50 at once');
    expect(text).toContain('Rate limit1,000 per 1 min');
    expect(text).toContain('Each group’s concurrency limit10 at once');
    expect(text).toContain('Each group’s rate limit600 per 1 min');
    await nothingRan(page);
  });

  it('opens a group whose name is markup: shown as text, with its own jobs only', async () => {
    await groupLink(page, 'renders', XSS_GROUP).click();
    await page.getByRole('heading', { name: `Group ${XSS_GROUP}` }).waitFor();
    expect(page.url()).toContain(`/groups/${encodeURIComponent(XSS_GROUP)}`);
    const ids = await readyIds('renders', XSS_GROUP);
    expect(ids).toHaveLength(2);
    const table = page.getByRole('table', { name: `ready jobs of group ${XSS_GROUP} of renders` });
    await eventually(() => table.locator('tbody th').allTextContents()).toEqual(ids);
    // The group's counts under the time the leader took them.
    const counts = page.getByRole('region', { name: /^Now, as of \d\d:\d\d:\d\d$/ });
    await eventually(() => counts.textContent()).toMatch(/Ready\s*2/);
    await nothingRan(page);
  });

  it('filters the queue’s job browser by group, in the URL', async () => {
    await page.getByRole('link', { name: 'renders', exact: true }).click();
    await page.getByRole('heading', { name: 'Jobs', exact: true }).waitFor();
    // Every group: each job's group is shown.
    const all = page.getByRole('table', { name: 'ready jobs of renders' });
    await eventually(() => all.locator('tbody tr').count()).toBe(9);

    await page.getByLabel('Group', { exact: true }).fill('customer:small');
    await page.getByRole('button', { name: 'Filter by group' }).click();
    await eventually(async () => page.url()).toContain('group=customer%3Asmall');
    const small = page.getByRole('table', { name: 'ready jobs of group customer:small of renders' });
    await eventually(() => small.locator('tbody th').allTextContents()).toEqual(
      await readyIds('renders', 'customer:small'),
    );

    await page.getByLabel('Group', { exact: true }).fill('has space');
    await page.getByRole('button', { name: 'Filter by group' }).click();
    await page.getByRole('alert').getByText('A group name is 1 to 128 printable ASCII characters').waitFor();
    expect(page.url()).toContain('group=customer%3Asmall');

    await page.getByRole('button', { name: 'Every group' }).click();
    await eventually(() => all.locator('tbody tr').count()).toBe(9);
    expect(page.url()).not.toContain('group=');
  });

  it('pauses a group after a confirmation naming it and its ready jobs: its jobs stop being claimed, the others’ are not', async () => {
    await page.getByRole('button', { name: 'Pause group customer:big of renders' }).click();
    const dialog = page.getByRole('dialog', { name: 'Pause group customer:big of renders?' });
    await dialog.waitFor();
    expect(await dialog.textContent()).toMatch(/5 ready jobs will wait \(as counted at .+\)/);
    await dialog.getByRole('button', { name: 'Pause customer:big' }).click();
    await page.getByRole('status').getByText('Group customer:big of renders paused.').waitFor();
    await page.getByRole('row', { name: /^customer:big paused/ }).waitFor();
    expect((await asOps('GET', groupPath('renders', 'customer:big'))).body.paused).toBe(true);

    const claim = await asOps('POST', '/v1/queues/renders/claim', { max_jobs: 20, worker_id: 'render-1' });
    const groups = (claim.body.jobs as { group: string | null }[]).map((j) => j.group).sort();
    expect(groups).toEqual([null, XSS_GROUP, XSS_GROUP, 'customer:small'].sort());
    for (const job of claim.body.jobs) {
      expect((await asOps('POST', `/v1/jobs/${job.id}/ack`, { lease_token: job.lease_token })).status).toBe(
        200,
      );
    }
    expect((await asOps('POST', '/v1/queues/renders/claim', { max_jobs: 20 })).body.jobs).toEqual([]);
  });

  it('a group’s page: counts, own settings, its jobs; resume, then reset to the queue’s defaults', async () => {
    await countGroups();
    await groupLink(page, 'renders', 'customer:big').click();
    await page.getByRole('heading', { name: 'Group customer:big paused' }).waitFor();
    const settings = page.locator('dl.settings');
    await eventually(() => settings.textContent()).toContain('Its own settingsweight 3, paused');
    // The queue's defaults come with the queue's own read, which may answer second.
    await eventually(() => settings.textContent()).toContain(
      'Weight3 jobs per turn (own) (queue default: 1)',
    );
    const jobs = page.getByRole('table', { name: 'ready jobs of group customer:big of renders' });
    await eventually(() => jobs.locator('tbody th').allTextContents()).toEqual(
      await readyIds('renders', 'customer:big'),
    );
    expect(await jobs.locator('tbody th').count()).toBe(5);

    await page.getByRole('button', { name: 'Resume group customer:big of renders' }).click();
    const resume = page.getByRole('dialog', { name: 'Resume group customer:big of renders?' });
    expect(await resume.textContent()).toContain('5 jobs ready');
    await resume.getByRole('button', { name: 'Resume customer:big' }).click();
    await page.getByRole('heading', { name: 'Group customer:big', exact: true }).waitFor();
    const claim = await asOps('POST', '/v1/queues/renders/claim', { max_jobs: 2 });
    expect(claim.body.jobs.map((j: { group: string }) => j.group)).toEqual(['customer:big', 'customer:big']);

    await page
      .getByRole('button', { name: 'Reset group customer:big of renders to the queue’s defaults' })
      .click();
    const reset = page.getByRole('dialog', { name: /^Reset group customer:big/ });
    expect(await reset.textContent()).toContain('drops its own settings (weight 3)');
    await reset.getByRole('button', { name: 'Reset customer:big' }).click();
    await page
      .getByRole('status')
      .getByText('Group customer:big of renders reset to the queue’s defaults.')
      .waitFor();
    await eventually(() => settings.textContent()).toContain('none: it follows the queue’s group defaults');
    expect((await asOps('GET', groupPath('renders', 'customer:big'))).body.overridden).toEqual([]);
    expect(
      await page.getByRole('button', { name: /^Reset group customer:big/ }).getAttribute('disabled'),
    ).not.toBeNull();
  });

  it('a job’s page shows its group (linking to the group’s page), its trace context and its metadata', async () => {
    const traceparent = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01';
    const { body: job } = await asOps('POST', '/v1/queues/renders/jobs', {
      payload: { page: 7 },
      group: 'customer:small',
      traceparent,
      tracestate: 'congo=t61rcWkgMzE',
    });
    await page.goto(`${server.url}/ui#/jobs/${job.id}`);
    await page.getByRole('heading', { name: `Job ${job.id}` }).waitFor();
    const facts = page.locator('dl.settings');
    await eventually(() => facts.textContent()).toContain(`Trace (traceparent)${traceparent}`);
    expect(await facts.textContent()).toContain('Trace state (tracestate)congo=t61rcWkgMzE');
    const meta = page.locator('section', { has: page.getByRole('heading', { name: 'Metadata' }) });
    expect(await meta.locator('pre').textContent()).toContain(traceparent);
    await facts.getByRole('link', { name: 'customer:small' }).click();
    await page.getByRole('heading', { name: 'Group customer:small' }).waitFor();
  });

  it('lists every schedule from the header link, with queue, cron and time zone, next run and source', async () => {
    for (const [name, body] of [
      [
        'nightly-renders',
        {
          queue: 'renders',
          cron: '30 2 * * *',
          timezone: 'Europe/Berlin',
          payload: { all: true },
          timeout_ms: 90_000,
          expires_in_ms: 3_600_000,
        },
      ],
      ['hourly-digest', { queue: 'emails', cron: '0 * * * *' }],
      // Once a year, so that no occurrence clears its error (or adds a job) during the walk.
      ['broken-renders', { queue: 'renders', cron: '0 3 1 1 *' }],
    ] as const) {
      expect((await asOps('PUT', `/v1/schedules/${name}`, body)).status).toBe(201);
    }
    // An occurrence that could not be enqueued: its message is user data, and could be anything.
    await sql`UPDATE baton.schedules SET last_error = jsonb_build_object('at', to_json(now()) #>> '{}', 'message', ${XSS}::text)
              WHERE name = 'broken-renders'`.execute(database.db);

    await page.getByRole('link', { name: 'Schedules' }).click();
    await page.getByRole('heading', { name: 'Schedules' }).waitFor();
    const table = 'Cron schedules by name, with their next and last run';
    await eventually(() => rowHeaders(page, table)).toEqual([
      'broken-renders failed',
      'hourly-digest',
      'nightly-renders',
    ]);
    const nightly = await page
      .getByRole('row', { name: /^nightly-renders/ })
      .getByRole('cell')
      .allTextContents();
    expect(nightly.slice(0, 2)).toEqual(['renders', '30 2 * * * Europe/Berlin']);
    expect(nightly[2]).toMatch(/ in \d+ (s|min|h)$/);
    expect(nightly.slice(3)).toEqual(['—', '—', 'API']);
  });

  it('triggers a schedule after a confirmation saying it enqueues one job into its queue now: one job, through the API', async () => {
    const before = await readyIds('renders');
    await page.getByRole('link', { name: 'nightly-renders' }).click();
    await page.getByRole('heading', { name: 'Schedule nightly-renders' }).waitFor();
    // The fields each job gets, as the schedule gives them.
    const definition = await page.locator('dl.settings').textContent();
    expect(definition).toContain(
      'GroupnoneTimeout per attempt90 sExpires1 h after it is enqueuedUnique keynone',
    );
    await page.getByRole('button', { name: 'Trigger schedule nightly-renders now' }).click();
    const dialog = page.getByRole('dialog', { name: 'Trigger schedule nightly-renders now?' });
    expect(await dialog.textContent()).toContain('Enqueues one job into renders now');
    await dialog.getByRole('button', { name: 'Enqueue 1 job into renders' }).click();
    const status = page.getByRole('status').getByText(/^Job \d+ enqueued into renders \(ready\)\.$/);
    await status.waitFor();
    const id = /Job (\d+)/.exec((await status.textContent())!)![1]!;

    const after = await readyIds('renders');
    expect(after.filter((j) => !before.includes(j))).toEqual([id]);
    expect(after).toHaveLength(before.length + 1);
    const job = (await asOps('GET', `/v1/jobs/${id}`)).body;
    expect([job.queue, job.payload]).toEqual(['renders', { all: true }]);
    expect((await asOps('GET', '/v1/schedules/nightly-renders')).body.last_job_id).toBe(id);
    await page.locator('dl.settings').getByRole('link', { name: id, exact: true }).waitFor();
  });

  it('pauses and resumes a schedule, each after a confirmation', async () => {
    await page.getByRole('button', { name: 'Pause schedule nightly-renders' }).click();
    const pause = page.getByRole('dialog', { name: 'Pause schedule nightly-renders?' });
    expect(await pause.textContent()).toMatch(
      /enqueues nothing into renders until it is resumed: its next run, .+, will not happen/,
    );
    await pause.getByRole('button', { name: 'Pause nightly-renders' }).click();
    await page.getByRole('heading', { name: 'Schedule nightly-renders paused' }).waitFor();
    expect((await asOps('GET', '/v1/schedules/nightly-renders')).body).toMatchObject({
      paused: true,
      next_run_at: null,
    });

    await page.getByRole('button', { name: 'Resume schedule nightly-renders' }).click();
    await page.getByRole('dialog').getByRole('button', { name: 'Resume nightly-renders' }).click();
    await page.getByRole('heading', { name: 'Schedule nightly-renders', exact: true }).waitFor();
    expect((await asOps('GET', '/v1/schedules/nightly-renders')).body.paused).toBe(false);
  });

  it('shows a schedule’s last error as text', async () => {
    await page.getByRole('link', { name: 'Schedules' }).click();
    await page.getByRole('link', { name: 'broken-renders' }).click();
    await page.getByRole('heading', { name: 'Schedule broken-renders' }).waitFor();
    expect(await page.getByTestId('last-error').textContent()).toBe(XSS);
    await nothingRan(page);
  });

  it('takes the screenshots of groups and schedules for docs/screenshots', async () => {
    await asOps('PUT', '/v1/queues/exports', {
      concurrency_limit: 20,
      group_concurrency_limit: 4,
      group_rate_limit: { limit: 120, period_ms: 60_000 },
    });
    await enqueue('exports', [
      ...times(42, { group: 'tenant:acme' }),
      ...times(17, { group: 'tenant:globex' }),
      ...times(9, { group: 'tenant:initech' }),
      ...times(6, { group: 'tenant:umbrella' }),
      ...times(3, {}),
    ]);
    await asOps('PUT', groupPath('exports', 'tenant:acme'), { weight: 2, concurrency_limit: 8 });
    await asOps('PUT', groupPath('exports', 'tenant:initech'), { paused: true });
    await asOps('POST', '/v1/queues/exports/claim', { max_jobs: 7, worker_id: 'export-1' });
    await asOps('DELETE', '/v1/schedules/broken-renders');
    await asOps('PUT', '/v1/schedules/weekly-report', {
      queue: 'exports',
      cron: '0 8 * * 1',
      timezone: 'America/New_York',
    });
    await asOps('PUT', '/v1/schedules/purge-temp', { queue: 'exports', cron: '*/15 * * * *', paused: true });
    await countGroups();

    await page.goto(`${server.url}/ui#/queues/exports`);
    const groups = page.locator('section', { has: page.getByRole('heading', { name: 'Groups' }) });
    await eventually(() => rowHeaders(page, 'Groups of exports, busiest first')).toEqual([
      'tenant:acme',
      'tenant:globex',
      'tenant:initech paused',
      'tenant:umbrella',
      '(no group)',
    ]);
    await groups.screenshot({ path: shot('groups.png') });

    await page.getByRole('link', { name: 'Schedules' }).click();
    await eventually(() => rowHeaders(page, 'Cron schedules by name, with their next and last run')).toEqual([
      'hourly-digest',
      'nightly-renders',
      'purge-temp paused',
      'weekly-report',
    ]);
    await page.screenshot({ path: shot('schedules.png'), clip: { x: 0, y: 0, width: 1280, height: 370 } });
    for (const name of ['groups.png', 'schedules.png']) {
      expect((await fs.stat(shot(name))).size, name).toBeGreaterThan(10_000);
    }
  });

  it('never acts on another path than the one it shows: a group named ".." (made before the rule) is not sent', async () => {
    // As an older version could have made it; a browser would send /v1/queues/renders/groups/.. to
    // /v1/queues/renders, so the page must refuse to send it at all.
    await sql`INSERT INTO baton.queue_groups (queue, group_key, weight) VALUES ('renders', '..', 2)`.execute(
      database.db,
    );
    await page.goto(`${server.url}/ui/#/queues/renders`);
    await page.getByRole('button', { name: 'Pause group .. of renders' }).click();
    const dialog = page.getByRole('dialog', { name: 'Pause group .. of renders?' });
    await dialog.getByRole('button', { name: 'Pause ..' }).click();
    await page
      .getByRole('status')
      .getByText(/cannot be named in a URL/)
      .waitFor();
    const queue = await asOps('GET', '/v1/queues/renders');
    expect(queue.body.paused).toBe(false);

    await page.goto(`${server.url}/ui/#/queues/renders/groups/..`);
    await page
      .getByRole('alert')
      .getByText(/cannot be named in a URL/)
      .waitFor();
    expect(await page.getByRole('button', { name: /^Reset group/ }).count()).toBe(0);
    const { rows } = await sql<{ paused: boolean; weight: number }>`
      SELECT paused, weight FROM baton.queue_groups WHERE queue = 'renders' AND group_key = '..'`.execute(
      database.db,
    );
    expect(rows).toEqual([{ paused: false, weight: 2 }]);
    expect((await asOps('GET', '/v1/queues/renders')).status).toBe(200);
  });

  it('logged no console error or warning, and threw nothing, on any page', () => {
    expect(problems).toEqual([]);
  });
});

describe('groups and schedules, with keys that may not act', WALK, () => {
  it('a read-only key sees groups and schedules but no button to change them, and the API refuses anyway', async () => {
    const { context, page, problems } = await openPage();
    try {
      await signIn(page, SECRETS.viewer);
      await page.goto(`${server.url}/ui#/queues/renders`);
      await page.getByRole('heading', { name: 'Groups' }).waitFor();
      await page.getByRole('table', { name: 'Groups of renders, busiest first' }).waitFor();
      const buttons = page.getByRole('button', { name: /pause|resume|reset|trigger|purge|redrive/i });
      expect(await buttons.count()).toBe(0);
      await groupLink(page, 'renders', 'customer:big').click();
      await page.getByRole('heading', { name: 'Group customer:big' }).waitFor();
      await page.getByRole('heading', { name: 'Jobs', exact: true }).waitFor();
      expect(await buttons.count()).toBe(0);
      await page.getByRole('link', { name: 'Schedules' }).click();
      await page.getByRole('link', { name: 'nightly-renders' }).click();
      await page.getByRole('heading', { name: 'Definition' }).waitFor();
      expect(await buttons.count()).toBe(0);

      const viewer = (method: string, url: string, body?: unknown) => call(SECRETS.viewer, method, url, body);
      for (const refused of [
        await viewer('PUT', groupPath('renders', 'customer:big'), { paused: true }),
        await viewer('DELETE', groupPath('renders', 'customer:big')),
        await viewer('POST', '/v1/schedules/nightly-renders/trigger'),
        await viewer('POST', '/v1/schedules/nightly-renders/pause'),
      ]) {
        expect(refused.status).toBe(403);
        expect(refused.body.code).toBe('forbidden');
      }
      expect((await asOps('GET', groupPath('renders', 'customer:big'))).body.paused).toBe(false);
      expect((await asOps('GET', '/v1/schedules/nightly-renders')).body.paused).toBe(false);
      expect(problems).toEqual([]);
    } finally {
      await context.close();
    }
  });

  it('a key limited to some queues sees only their schedules', async () => {
    const { context, page, problems } = await openPage();
    try {
      await signIn(page, SECRETS.renders);
      await page.getByRole('link', { name: 'Schedules' }).click();
      await page.getByText('This key sees only the schedules of the queues it may use.').waitFor();
      await eventually(() =>
        rowHeaders(page, 'Cron schedules by name, with their next and last run'),
      ).toEqual(['nightly-renders']);
      expect(problems).toEqual([]);
    } finally {
      await context.close();
    }
  });
});
