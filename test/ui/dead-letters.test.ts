import {
  ChangeMessageVisibilityCommand,
  CreateQueueCommand,
  ReceiveMessageCommand,
  SendMessageCommand,
} from '@aws-sdk/client-sqs';
import type { BrowserContext, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sqsClient } from '../sqs/support.js';
import { eventually, SECRETS, useDashboard, WALK } from './walk.js';

/**
 * A dead-letter queue's page in headless Chromium, with real SQS traffic: messages die on their one
 * allowed receive, the leader (every 200 ms) forwards them to the dead-letter queue, and the page
 * sends them back to where they died, then shows the move's progress; a viewer sees the moves but
 * has no button.
 */
const ACCESS = { accessKeyId: 'AKIADASHBOARDOPS', secretAccessKey: 'dashboard-ops-secret-access-key' };
const { asOps, openPage, signIn, server, shot } = useDashboard({
  BATON_SQS_CREDENTIALS: JSON.stringify([
    { access_key_id: ACCESS.accessKeyId, secret_access_key: ACCESS.secretAccessKey, api_key: 'ops' },
  ]),
});
const urlOf = (queue: string) => `${server.url}/000000000000/${queue}`;

beforeAll(async () => {
  const sqs = sqsClient(server.url, { credentials: ACCESS });
  try {
    await sqs.send(new CreateQueueCommand({ QueueName: 'orders-dlq' }));
    const RedrivePolicy = JSON.stringify({
      deadLetterTargetArn: 'arn:aws:sqs:us-east-1:000000000000:orders-dlq',
      maxReceiveCount: 1,
    });
    await sqs.send(new CreateQueueCommand({ QueueName: 'orders', Attributes: { RedrivePolicy } }));
    for (const n of [1, 2, 3]) {
      await sqs.send(new SendMessageCommand({ QueueUrl: urlOf('orders'), MessageBody: `order ${n}` }));
    }
    for (let left = 3; left > 0; ) {
      const { Messages = [] } = await sqs.send(
        new ReceiveMessageCommand({ QueueUrl: urlOf('orders'), MaxNumberOfMessages: 10 }),
      );
      for (const m of Messages) {
        await sqs.send(
          new ChangeMessageVisibilityCommand({
            QueueUrl: urlOf('orders'),
            ReceiptHandle: m.ReceiptHandle!,
            VisibilityTimeout: 0,
          }),
        );
      }
      left -= Messages.length;
    }
  } finally {
    sqs.destroy();
  }
  // Forwarded and counted by the leader (every 200 ms here).
  for (let tries = 0; (await asOps('GET', '/v1/queues/orders-dlq')).body.stats.ready !== 3; tries++) {
    if (tries > 150) throw new Error('the messages never reached orders-dlq');
    await new Promise((r) => setTimeout(r, 100));
  }
});

const readyIn = async (queue: string) =>
  (await asOps('GET', `/v1/queues/${queue}/jobs?state=ready`)).body.jobs.length;

describe('a dead-letter queue’s page', WALK, () => {
  let context: BrowserContext;
  let page: Page;
  let problems: string[];
  beforeAll(async () => {
    ({ context, page, problems } = await openPage());
  });
  afterAll(() => context?.close());

  it('says whose dead-letter queue it is, sends the jobs back after a confirmation, and shows the move', async () => {
    await signIn(page, SECRETS.ops);
    await page.goto(`${server.url}/ui#/queues/orders-dlq`);
    const section = page.getByRole('region', { name: 'Dead letters' });
    await section.getByText('The dead-letter queue of orders').waitFor();
    await section
      .getByRole('button', { name: 'Send the ready jobs of orders-dlq back to where they died' })
      .click();
    const dialog = page.getByRole('dialog', {
      name: 'Send the ready jobs of orders-dlq back to where they died?',
    });
    await dialog.waitFor();
    expect(await dialog.textContent()).toMatch(
      /Each ready job of orders-dlq, 3 jobs \(as counted at .+\), goes back to the queue it died in \(orders\)/,
    );
    await dialog.getByRole('button', { name: 'Send back 3 jobs' }).click();
    await section
      .getByRole('status')
      .getByText('Move started: 3 jobs of orders-dlq going back to where they died.')
      .waitFor();
    const moves = section.getByRole('table', { name: 'Moves of orders-dlq, the latest first' });
    await eventually(() => moves.locator('tbody tr').first().locator('td').allTextContents()).toEqual([
      'where each died',
      'completed',
      '3 of 3',
      expect.any(String),
    ]);
    expect(await readyIn('orders')).toBe(3);
    expect(await readyIn('orders-dlq')).toBe(0);
    // Nothing left to send: the button says so.
    await eventually(() =>
      section
        .getByRole('button', { name: 'Send the ready jobs of orders-dlq back to where they died' })
        .getAttribute('title'),
    ).toBe('No ready jobs');
    await page.screenshot({ path: shot('dead-letter-queue.png'), fullPage: true });
    expect(problems).toEqual([]);
  });

  it('a viewer sees the moves, and no button', async () => {
    const viewer = await openPage();
    try {
      await signIn(viewer.page, SECRETS.viewer);
      await viewer.page.goto(`${server.url}/ui#/queues/orders-dlq`);
      const section = viewer.page.getByRole('region', { name: 'Dead letters' });
      await section.getByRole('table', { name: 'Moves of orders-dlq, the latest first' }).waitFor();
      expect(await section.getByRole('button').count()).toBe(0);
      // A queue that is no dead-letter queue, and never had a move, has no such section.
      await viewer.page.goto(`${server.url}/ui#/queues/orders`);
      await viewer.page.getByRole('heading', { name: 'Queue orders' }).waitFor();
      await viewer.page.getByRole('heading', { name: 'Settings' }).waitFor();
      expect(await viewer.page.getByRole('region', { name: 'Dead letters' }).count()).toBe(0);
      expect(viewer.problems).toEqual([]);
    } finally {
      await viewer.context.close();
    }
  });
});
