import { describe, expect, it } from 'vitest';
import { awaitFinished } from '../../src/wake/await-finish.js';
import { FinishWaitList } from '../../src/wake/finish-wait-list.js';
import type { Notifier } from '../../src/wake/notifier.js';

/**
 * The order of an await's steps, without a database: a registered waiter first tells the other
 * replicas it waits (Notifier.awaiting, a NOTIFY that a busy server may take a while to send), then
 * sleeps. A client that leaves during that notice must end the wait as one that leaves later does.
 */
function replica(sendNotice: Promise<void>) {
  const finishWaits = new FinishWaitList();
  const notifier = { finishWaits, awaiting: () => sendNotice } as unknown as Notifier;
  return { finishWaits, notifier };
}

const options = (signal: AbortSignal) => ({
  items: [{ id: '1' }],
  readStates: async () => new Map([['1', 'claimed']]),
  readAnswer: async () => 'answered as it is',
  isFinished: (state: string) => state === 'completed',
  waitMs: 20_000,
  signal,
});

describe('awaitFinished', () => {
  it('ends at once when the client leaves while the notice of its wait is being sent', async () => {
    let sent!: () => void;
    const { finishWaits, notifier } = replica(new Promise<void>((r) => (sent = r)));
    const abort = new AbortController();
    const started = Date.now();
    const answer = awaitFinished(notifier, options(abort.signal));
    await new Promise((r) => setTimeout(r, 10));
    expect(finishWaits.waiting()).toBe(1);
    abort.abort();
    sent();
    expect(await answer).toBe('answered as it is');
    expect(finishWaits.waiting()).toBe(0);
    expect(Date.now() - started).toBeLessThan(5_000);
  });

  it('ends at once when the client leaves while it sleeps', async () => {
    const { finishWaits, notifier } = replica(Promise.resolve());
    const abort = new AbortController();
    const answer = awaitFinished(notifier, options(abort.signal));
    await new Promise((r) => setTimeout(r, 10));
    expect(finishWaits.waiting()).toBe(1);
    abort.abort();
    expect(await answer).toBe('answered as it is');
    expect(finishWaits.waiting()).toBe(0);
  });
});
