import { sql } from 'kysely';
import { describe, expect, it } from 'vitest';
import type { BatonApp } from '../../src/app.js';
import { promoteDueJobs } from '../../src/maintenance/promote.js';
import { useTestReplicas } from '../support/app.js';
import { useTestDatabase } from '../support/database.js';
import { api, enqueueAndClaimMany } from '../support/http.js';
import { until } from '../support/until.js';

/**
 * A cancel racing a move of the same job between live tables (issue 39, finding 4): the release of a
 * child when its parent is acked (waiting → ready, in the ack's transaction or shortly after it in
 * the releaser's), the promoter (scheduled → ready) and a nack to a backoff (claimed → scheduled).
 * The cancel once read the three live tables on one snapshot, missed the moved row and answered 409
 * "already ready" while the job went on to run. Every race here must end with the job cancelled, the
 * cancel's answer saying so, and no claim getting it; a queue purge likewise cancels every job.
 */

const database = useTestDatabase();
const replicas = useTestReplicas(database, 2);
/** One of the two replicas (filled in by beforeAll), taking turns by round. */
const replica = (i: number): BatonApp => replicas[i % 2]!;

const ROUNDS = 80;

/** Wait a random 0 to `ms` milliseconds, so each side of a race sometimes starts first. */
const stagger = (ms: number) => new Promise((r) => setTimeout(r, Math.random() * ms));

/** Each job is neither waiting nor scheduled any more (its release or promotion, if any, is done). */
async function settled(ids: string[]): Promise<Map<string, string>> {
  const states = new Map<string, string>();
  await until(async () => {
    for (const id of ids) states.set(id, (await api(replica(0)).get(id)).body.state);
    return [...states.values()].every((s) => s !== 'waiting' && s !== 'scheduled');
  });
  return states;
}

/** A parent claimed on `queue` and `children` waiting for it on `childQueue`. */
async function family(queue: string, childQueue: string, children: number) {
  const parent = await api(replica(0)).enqueue(queue, { payload: 'parent' });
  expect(parent.status).toBe(201);
  const kids = await api(replica(0)).enqueueBatch(
    childQueue,
    Array.from({ length: children }, (_, i) => ({ payload: i, depends_on: [parent.body.id] })),
  );
  expect(kids.body.jobs.map((j: { state: string }) => j.state)).toEqual(Array(children).fill('waiting'));
  const [job] = (await api(replica(0)).claim(queue)).body.jobs;
  expect(job.id).toBe(parent.body.id);
  return {
    parent: job as { id: string; lease_token: string },
    children: kids.body.jobs.map((j: { id: string }) => j.id) as string[],
  };
}

/** The ids a claim of `queue` got: none, as long as every job of it was cancelled. */
async function claimed(queue: string): Promise<string[]> {
  return (await api(replica(1)).claim(queue, { max_jobs: 100 })).body.jobs.map((j: { id: string }) => j.id);
}

describe('a cancel racing a move of its job', () => {
  it(`a child cancelled while its parent is acked on the other replica: ${ROUNDS} of ${ROUNDS} cancelled, none run`, async () => {
    // Collected over every round, so a failure says how many of the rounds went wrong and how.
    const [refused, ended, ran]: [string[], string[], string[]] = [[], [], []];
    for (let round = 0; round < ROUNDS; round++) {
      const { parent, children } = await family('cr-release', 'cr-release-child', 1);
      const child = children[0]!;
      const [ack, cancel] = await Promise.all([
        stagger(2).then(() => api(replica(round)).ack(parent.id, { lease_token: parent.lease_token })),
        stagger(8).then(() => api(replica(round + 1)).cancel(child)),
      ]);
      expect(ack.status).toBe(200);
      if (cancel.status !== 200 || cancel.body.state !== 'cancelled') {
        refused.push(`${child}: ${cancel.status} ${cancel.body.detail ?? cancel.body.state}`);
      }
      const state = (await settled([child])).get(child);
      if (state !== 'cancelled') ended.push(`${child}: ${state}`);
      ran.push(...(await claimed('cr-release-child')));
    }
    expect({ refused, ended, ran }).toEqual({ refused: [], ended: [], ran: [] });
  });

  it(`a scheduled job cancelled while the promoter moves it: ${ROUNDS} of ${ROUNDS} cancelled, none run`, async () => {
    const [refused, ended, ran]: [string[], string[], string[]] = [[], [], []];
    for (let round = 0; round < ROUNDS; round++) {
      const enq = await api(replica(0)).enqueue('cr-promote', { payload: round, delay_ms: 60_000 });
      const id = enq.body.id as string;
      await sql`UPDATE baton.scheduled_jobs SET run_at = now() WHERE id = ${id}::bigint`.execute(database.db);
      const [, cancel] = await Promise.all([
        stagger(2).then(() => promoteDueJobs(database.db, 100, 1000)),
        stagger(4).then(() => api(replica(round)).cancel(id)),
      ]);
      if (cancel.status !== 200 || cancel.body.state !== 'cancelled') {
        refused.push(`${id}: ${cancel.status} ${cancel.body.detail ?? cancel.body.state}`);
      }
      const state = (await settled([id])).get(id);
      if (state !== 'cancelled') ended.push(`${id}: ${state}`);
      ran.push(...(await claimed('cr-promote')));
    }
    expect({ refused, ended, ran }).toEqual({ refused: [], ended: [], ran: [] });
  });

  it('a queue purge while the promoter moves its scheduled jobs: every job cancelled, none run', async () => {
    // The passes of cancelQueueJobs, as SQS PurgeQueue and a forced queue delete run them too. Each
    // round's promoter takes 5 due jobs per run, so its moves spread over the purge's passes.
    const left: string[] = [];
    for (let round = 0; round < ROUNDS / 2; round++) {
      const queue = `cr-purge-${round}`;
      const jobs = Array.from({ length: 20 }, (_, i) => ({ payload: i, delay_ms: 60_000 }));
      expect((await api(replica(0)).enqueueBatch(queue, jobs)).status).toBe(201);
      await sql`UPDATE baton.scheduled_jobs SET run_at = now() WHERE queue = ${queue}`.execute(database.db);
      const [, purge] = await Promise.all([
        stagger(3).then(async () => {
          while ((await promoteDueJobs(database.db, 5, 5)).promoted > 0);
        }),
        stagger(3).then(() => replica(round).inject({ method: 'POST', url: `/v1/queues/${queue}/purge` })),
      ]);
      expect(purge.statusCode, purge.body).toBe(200);
      const ran = await claimed(queue);
      if (purge.json().cancelled !== 20 || ran.length > 0) {
        left.push(`${queue}: ${purge.json().cancelled} cancelled, ${ran.length} claimed after the purge`);
      }
    }
    expect(left).toEqual([]);
  });

  it(`a claimed job cancelled while its worker nacks it to a backoff: ${ROUNDS} of ${ROUNDS} cancelled`, async () => {
    // The nack moves the job from the ring to scheduled_jobs, in a transaction that locks it first.
    const [refused, ended]: [string[], string[]] = [[], []];
    for (let round = 0; round < ROUNDS; round++) {
      const [job] = await enqueueAndClaimMany(replica(0), 'cr-nack', 1);
      const [nack, cancel] = await Promise.all([
        stagger(1).then(() =>
          api(replica(round)).nack(job.id, { lease_token: job.lease_token, retry_in_ms: 60_000 }),
        ),
        stagger(3).then(() => api(replica(round + 1)).cancel(job.id)),
      ]);
      // The nack wins or finds its lease gone (409 lease_lost); the cancel, either way, cancels.
      expect([200, 409]).toContain(nack.status);
      if (cancel.status !== 200 || cancel.body.state !== 'cancelled') {
        refused.push(`${job.id}: ${cancel.status} ${cancel.body.detail ?? cancel.body.state}`);
      }
      const state = (await api(replica(0)).get(job.id)).body.state;
      if (state !== 'cancelled') ended.push(`${job.id}: ${state}`);
    }
    expect({ refused, ended }).toEqual({ refused: [], ended: [] });
  });

  it(`a bulk cancel of children while their parent is acked on the other replica: ${ROUNDS} of ${ROUNDS} cancelled`, async () => {
    const [refused, ended, ran]: [string[], string[], string[]] = [[], [], []];
    const perRound = 4;
    for (let round = 0; round < ROUNDS / perRound; round++) {
      const { parent, children } = await family('cr-bulk', 'cr-bulk-child', perRound);
      const [ack, bulk] = await Promise.all([
        stagger(2).then(() => api(replica(round)).ack(parent.id, { lease_token: parent.lease_token })),
        stagger(8).then(() =>
          replica(round + 1).inject({
            method: 'POST',
            url: '/v1/jobs/bulk',
            payload: { action: 'cancel', ids: children },
          }),
        ),
      ]);
      expect(ack.status).toBe(200);
      expect(bulk.statusCode, bulk.body).toBe(200);
      for (const result of bulk.json().results as { id: string; outcome: string; state: string }[]) {
        if (result.outcome !== 'cancelled' || result.state !== 'cancelled')
          refused.push(JSON.stringify(result));
      }
      for (const [id, state] of await settled(children))
        if (state !== 'cancelled') ended.push(`${id}: ${state}`);
      ran.push(...(await claimed('cr-bulk-child')));
    }
    expect({ refused, ended, ran }).toEqual({ refused: [], ended: [], ran: [] });
  });
});
