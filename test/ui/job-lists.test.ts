import type { BrowserContext, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { recordQueueHistory } from '../../src/maintenance/queue-history.js';
import { refreshFinishedStats, refreshLiveStats } from '../../src/maintenance/queue-stats.js';
import { eventually, SECRETS, useDashboard, WALK } from './walk.js';

/**
 * The Jobs page (#/jobs), in headless Chromium against a real server and PostgreSQL: dead and failing
 * jobs of every queue with their filters, a list that refreshes on its own but holds still while the
 * operator selects, bulk actions with a count to confirm and a result per job, and search by key.
 */
const { database, call, asOps, openPage, signIn, shot } = useDashboard();

/** Enqueue into `queue` and fail each job once: to dead, or to a retry a minute away. */
async function fail(queue: string, messages: string[], opts: { dead?: boolean; group?: string } = {}) {
  const ids: string[] = [];
  for (const message of messages) {
    const enq = await asOps('POST', `/v1/queues/${queue}/jobs`, {
      payload: { message },
      ...(opts.group ? { group: opts.group } : {}),
    });
    expect(enq.status).toBe(201);
    const [job] = (await asOps('POST', `/v1/queues/${queue}/claim`, {})).body.jobs;
    const nack = await asOps('POST', `/v1/jobs/${job.id}/nack`, {
      lease_token: job.lease_token,
      error: { message },
      ...(opts.dead === false ? { retry_in_ms: 60_000 } : { dead: true }),
    });
    expect(nack.status).toBe(200);
    ids.push(job.id);
  }
  return ids;
}

/** Open a page of the dashboard by its fragment, in the signed-in tab. */
const go = (page: Page, fragment: string) => page.goto(`${page.url().split('#')[0]}${fragment}`);

const rows = (page: Page) => page.locator('table.across tbody tr');
const rowIds = async (page: Page) => rows(page).locator('th').allTextContents();

describe('jobs across queues', WALK, () => {
  let context: BrowserContext;
  let page: Page;
  let problems: string[];
  let mail: string[];
  let pdf: string[];
  let retrying: string[];
  beforeAll(async () => {
    mail = await fail('ui-mail', ['SMTP timeout', 'bad address', 'SMTP timeout again']);
    pdf = await fail('ui-pdf', ['font missing'], { group: 'tenant:9' });
    retrying = await fail('ui-pdf', ['render crashed'], { dead: false });
    await fail('renders-big', ['out of memory']);
    ({ context, page, problems } = await openPage());
    await signIn(page, SECRETS.ops);
  });
  afterAll(() => context?.close());

  it('lists the last hour’s dead jobs of every queue, newest first, and filters them by queue, error text and kind', async () => {
    await page.getByRole('link', { name: 'Jobs', exact: true }).click();
    await page.getByRole('heading', { name: 'Jobs across queues' }).waitFor();
    await eventually(async () => {
      const ids = await rowIds(page);
      return [...mail, ...pdf].every((id) => ids.includes(id));
    }).toBe(true);
    const ids = await rowIds(page);
    // Newest failure first: the pdf job died after the mail jobs.
    expect(ids.indexOf(pdf[0]!)).toBeLessThan(ids.indexOf(mail[2]!));
    expect(ids.indexOf(mail[2]!)).toBeLessThan(ids.indexOf(mail[0]!));
    // The group shows under the queue.
    await page.screenshot({ path: shot('jobs.png'), fullPage: true });
    const pdfRow = rows(page).filter({ has: page.getByRole('rowheader', { name: pdf[0]!, exact: true }) });
    expect(await pdfRow.textContent()).toContain('tenant:9');

    await page.getByLabel('Error text').fill('smtp timeout');
    await page.getByRole('button', { name: 'Apply' }).click();
    await eventually(() => rowIds(page)).toEqual([mail[2], mail[0]]);
    expect(page.url()).toContain('error=smtp');

    await page.getByLabel('Error text').fill('');
    await page.getByLabel('Queue').fill('ui-pdf');
    await page.getByRole('button', { name: 'Apply' }).click();
    await eventually(() => rowIds(page)).toEqual(pdf);
    await page.getByLabel('Show').selectOption('failing');
    await eventually(() => rowIds(page)).toEqual(retrying);
    expect(await rows(page).first().textContent()).toContain('render crashed');
    expect(problems).toEqual([]);
  });

  it('leads from a queue needing attention on the first page to its dead jobs', async () => {
    // The leader counts dead jobs about once a minute: the test counts them itself.
    await refreshFinishedStats(database.db, { olderThanMs: 0 });
    await page.getByRole('link', { name: 'Queues', exact: true }).click();
    const attention = page.getByRole('list', { name: 'Queues needing attention' });
    await attention
      .getByRole('listitem')
      .filter({ hasText: 'ui-mail' })
      .getByRole('link', { name: 'see its dead jobs' })
      .click();
    await page.getByRole('heading', { name: 'Jobs across queues' }).waitFor();
    await eventually(() => rowIds(page)).toEqual([...mail].reverse());
  });

  it('refreshes on its own, but holds still while jobs are selected', async () => {
    await go(page, '#/jobs?queue=ui-live');
    await page.getByText('No dead jobs of ui-live.').waitFor();
    const [first] = await fail('ui-live', ['first']);
    await eventually(() => rowIds(page)).toEqual([first]);

    await page.getByLabel(`Select job ${first}`).check();
    await eventually(() => page.getByRole('status').first().textContent()).toMatch(/Holding still/);
    const [second] = await fail('ui-live', ['second']);
    // Three refresh periods pass (the page refreshes every 2 s here): the list has not moved.
    await page.waitForTimeout(6_000);
    expect(await rowIds(page)).toEqual([first]);

    await page.getByLabel(`Select job ${first}`).uncheck();
    // Pointer and focus leave the list: it refreshes again.
    await page.getByRole('heading', { name: 'Jobs across queues' }).click();
    await page.mouse.move(0, 0);
    await eventually(() => rowIds(page)).toEqual([second, first]);
  });

  it('redrives a selection after a confirmation that counts it, and shows what happened to each job', async () => {
    await go(page, '#/jobs?queue=ui-mail');
    await eventually(() => rowIds(page)).toEqual([...mail].reverse());
    await page.getByLabel('Select every job on this page').check();
    await page.getByRole('button', { name: 'Redrive 3 selected jobs' }).click();
    const dialog = page.getByRole('dialog');
    expect(await dialog.textContent()).toContain('3 dead jobs go back to ready');
    await dialog.getByRole('button', { name: 'Redrive 3 jobs' }).click();
    const results = page.getByRole('region', { name: 'Result per job' });
    await eventually(() => results.locator('tbody tr').count()).toBe(3);
    expect(await results.locator('tbody').textContent()).toMatch(/redriven.*redriven.*redriven/);
    await eventually(() => page.getByRole('status').last().textContent()).toContain('3 of 3 jobs done');
    for (const id of mail) expect((await asOps('GET', `/v1/jobs/${id}`)).body.state).toBe('ready');
    await eventually(() => page.getByText('No dead jobs of ui-mail.').count()).toBe(1);
  });

  it('deletes, runs now and cancels: each action is offered for the jobs it applies to, and says what it did', async () => {
    const [dead] = await fail('ui-mixed', ['gone for good']);
    const [retry] = await fail('ui-mixed', ['will retry'], { dead: false });
    // Two lists in turn: the dead one to delete, the failing one to cancel.
    await go(page, '#/jobs?queue=ui-mixed');
    await eventually(() => rowIds(page)).toEqual([dead]);
    await page.getByLabel(`Select job ${dead}`).check();
    expect(await page.getByRole('button', { name: 'Cancel 0 selected jobs' }).isDisabled()).toBe(true);
    await page.getByRole('button', { name: 'Delete 1 selected job' }).click();
    await page.getByRole('dialog').getByRole('button', { name: 'Delete 1 job' }).click();
    const results = page.getByRole('region', { name: 'Result per job' });
    await eventually(() => results.locator('tbody').textContent()).toMatch(/deleted.*gone/);
    expect((await asOps('GET', `/v1/jobs/${dead}`)).status).toBe(404);

    await go(page, '#/jobs?show=failing&queue=ui-mixed');
    await eventually(() => rowIds(page)).toEqual([retry]);
    // Its retry is an hour away: run it now, then cancel it.
    await page.getByLabel(`Select job ${retry}`).check();
    await page.getByRole('button', { name: 'Run now 1 selected job' }).click();
    expect(await page.getByRole('dialog').textContent()).toContain('1 scheduled job becomes ready now');
    await page.getByRole('dialog').getByRole('button', { name: 'Run now 1 job' }).click();
    await eventually(() => results.locator('tbody').textContent()).toMatch(/ready now.*ready/);
    expect((await asOps('GET', `/v1/jobs/${retry}`)).body.state).toBe('ready');
    await eventually(() => rows(page).first().textContent()).toContain('ready');
    await page.getByLabel(`Select job ${retry}`).check();
    await page.getByRole('button', { name: 'Cancel 1 selected job' }).click();
    await page.getByRole('dialog').getByRole('button', { name: 'Cancel 1 job' }).click();
    await eventually(() => results.locator('tbody').textContent()).toMatch(/cancelled/);
    expect((await asOps('GET', `/v1/jobs/${retry}`)).body.state).toBe('cancelled');
  });

  it('a retrying job: the failing list says when it retries, its page names the next retry and folds each stack to its first line', async () => {
    const enq = await asOps('POST', '/v1/queues/ui-stacks/jobs', { payload: {}, max_attempts: 5 });
    const stacks: unknown[] = [
      { stack: ['Error: disk full', '    at write (store.js:10:3)', '    at flush (store.js:40:9)'] },
      'TypeError: x is undefined\n    at render (page.js:7:1)',
      { code: 'E_QUOTA', limit: 10 },
    ];
    for (const [i, details] of stacks.entries()) {
      const [job] = (await asOps('POST', '/v1/queues/ui-stacks/claim', {})).body.jobs;
      expect(job.id).toBe(enq.body.id);
      const nack = await asOps('POST', `/v1/jobs/${job.id}/nack`, {
        lease_token: job.lease_token,
        error: { message: `attempt ${i + 1} failed`, details },
        retry_in_ms: i < stacks.length - 1 ? 0 : 3_600_000,
      });
      expect(nack.status).toBe(200);
    }
    const job = (await asOps('GET', `/v1/jobs/${enq.body.id}`)).body;
    expect(job.state).toBe('scheduled');

    await go(page, '#/jobs?show=failing&queue=ui-stacks');
    await eventually(() => rowIds(page)).toEqual([enq.body.id]);
    const headers = await page.locator('table.across thead th').allTextContents();
    const cells = await rows(page).first().locator(':scope > *').allTextContents();
    expect(headers).toContain('Next retry');
    // An hour away: a time of day, as the Failed column gives its time.
    expect(cells[headers.indexOf('Next retry')]).toMatch(/\d{1,2}:\d{2}/);

    await go(page, `#/jobs/${enq.body.id}`);
    await page.getByRole('heading', { name: 'Failed attempts' }).waitFor();
    await page.getByText('Next retry', { exact: true }).waitFor();
    expect(await page.getByText('Run at', { exact: true }).count()).toBe(0);
    const folded = page.locator('table.errors details');
    expect(await folded.locator('summary').allTextContents()).toEqual([
      'Error: disk full',
      'TypeError: x is undefined',
      '{',
    ]);
    // Folded: the rest of a stack shows only once opened.
    expect(await page.getByText('at flush (store.js:40:9)').isVisible()).toBe(false);
    await folded.first().locator('summary').click();
    await page.getByText('at flush (store.js:40:9)').waitFor();
    expect(await folded.nth(2).locator('pre').textContent()).toContain('"code": "E_QUOTA"');
    expect(problems).toEqual([]);
  });

  it('the first page shows those failed attempts before anything died: attention, failing now, a bar in the queue’s row', async () => {
    // The leader's minute sample, taken now rather than waited for (it counts the queue's error entries).
    await refreshLiveStats(database.db);
    await recordQueueHistory(database.db);
    await go(page, '#/');
    const item = page
      .getByRole('list', { name: 'Queues needing attention' })
      .getByRole('listitem')
      .filter({
        has: page.getByRole('link', { name: 'ui-stacks (needs attention)' }),
      });
    await eventually(() => item.textContent()).toMatch(/3 attempts failed in the last hour.*1 failing now/);
    await item.getByRole('link', { name: 'see its failing jobs' }).click();
    await eventually(() => rowIds(page)).toHaveLength(1);
    await go(page, '#/');
    const row = page.getByRole('row', { name: /ui-stacks/ });
    await eventually(() => row.getByRole('img').last().getAttribute('aria-label')).toBe(
      '3 attempts failed in the last hour, nothing finished',
    );
    expect(problems).toEqual([]);
  });

  it('a queue’s page: its jobs right after its counts, failing jobs among the states, dead ones newest first', async () => {
    await go(page, '#/queues/ui-stacks?state=failing');
    const browser = page.getByRole('region', { name: 'Jobs', exact: true });
    await eventually(() => browser.locator('tbody th').allTextContents()).toHaveLength(1);
    expect(await browser.locator('thead th').allTextContents()).toContain('Next retry');
    // The page reads counts, then jobs, then the charts and settings.
    const headings = await page.locator('main h2').allTextContents();
    expect(headings.indexOf('Jobs')).toBeLessThan(headings.indexOf('The last hour'));
    expect(headings.indexOf('Jobs')).toBeLessThan(headings.indexOf('Settings'));

    const died = await fail('ui-newest', ['first to die', 'second', 'third']);
    await go(page, '#/queues/ui-newest?state=dead');
    await eventually(() => page.locator('table.jobs tbody th').allTextContents()).toEqual(
      [...died].reverse(),
    );
    expect(await page.getByLabel('Order').inputValue()).toBe('desc');
    // Each row previews its payload.
    expect(await page.locator('table.jobs tbody td.payload').allTextContents()).toEqual(
      ['third', 'second', 'first to die'].map((message) => JSON.stringify({ message })),
    );
    expect(problems).toEqual([]);
  });

  it('selects every job of a list, not only the page, and acts on those counted, not on one that dies after', async () => {
    const quota = await fail(
      'ui-every',
      Array.from({ length: 30 }, (_, i) => `quota exceeded ${i}`),
    );
    await go(page, '#/jobs?queue=ui-every');
    await eventually(() => rowIds(page)).toHaveLength(25);
    await page.getByLabel('Select every job on this page').check();
    await page.getByRole('button', { name: 'Select every job of this list' }).click();
    await page.getByText('All 30 dead jobs of this list are selected').waitFor();
    const [late] = await fail('ui-every', ['quota exceeded, later']);

    await page.getByRole('button', { name: 'Redrive all 30 matching jobs' }).click();
    const dialog = page.getByRole('dialog');
    expect(await dialog.textContent()).toMatch(/30 dead jobs matching, as of .* go back to ready/);
    await dialog.getByRole('button', { name: 'Redrive 30 jobs' }).click();
    await eventually(() => page.getByRole('status').last().textContent()).toContain(
      'Redrive: 30 of 30 jobs done.',
    );
    for (const id of quota) expect((await asOps('GET', `/v1/jobs/${id}`)).body.state).toBe('ready');
    // The job that died after the count is the list now.
    await eventually(() => rowIds(page)).toEqual([late]);
    expect(await page.getByText('Select every job of this list').count()).toBe(0);
    expect(problems).toEqual([]);
  });

  it('finds the job an idempotency key made, from the header', async () => {
    const made = await asOps('POST', '/v1/queues/ui-orders/jobs', {
      payload: 1,
      idempotency_key: 'order-77',
    });
    await page.getByLabel('Find a job by id or key').fill('order-77');
    await page.getByRole('button', { name: 'Find', exact: true }).click();
    await page.getByRole('heading', { name: 'Named by key “order-77”' }).waitFor();
    await eventually(() => rowIds(page)).toEqual([made.body.id]);
  });

  it('to a key limited to some queues shows only theirs, with nothing to act with', async () => {
    // The API first: the limited key's list holds no other queue.
    const listed = await call(SECRETS.renders, 'GET', '/v1/jobs?state=dead');
    expect(listed.body.jobs.map((j: { queue: string }) => j.queue)).toEqual(['renders-big']);
    const narrow = await openPage();
    try {
      await signIn(narrow.page, SECRETS.renders);
      await go(narrow.page, '#/jobs');
      await eventually(() => rowIds(narrow.page)).toHaveLength(1);
      expect(await rows(narrow.page).textContent()).toContain('renders-big');
      expect(await narrow.page.getByRole('checkbox').count()).toBe(0);
      expect(narrow.problems).toEqual([]);
    } finally {
      await narrow.context.close();
    }
  });
});
