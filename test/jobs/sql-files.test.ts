import fs from 'node:fs';
import path from 'node:path';
import type { CompiledQuery } from 'kysely';
import { describe, expect, it } from 'vitest';
import { type Answer, recordStatements } from '../../src/db/statement-recorder.js';
import { ackBriefEach, ackEach } from '../../src/jobs/ack.js';
import { ackAndClaimEach } from '../../src/jobs/claim/ack-and-claim.js';
import { claimForGroup } from '../../src/jobs/claim/claim.js';
import { ClaimFloors } from '../../src/jobs/claim/floors.js';
import { releaseClaims } from '../../src/jobs/claim/release.js';
import { Signal } from '../../src/jobs/claim/statement.js';
import { enqueueJobs } from '../../src/jobs/enqueue/enqueue.js';
import { nackJob } from '../../src/jobs/nack.js';
import { queuesOfJobs } from '../../src/jobs/read.js';
import { renewLeases } from '../../src/jobs/renew.js';

/**
 * The SQL of the hot statements, exactly as the server sends it, committed in src/jobs/sql/: one file
 * per statement shape, so that a reader (and a review) sees the statements themselves and not only the
 * code that builds them. Each file is recorded from the query modules (src/db/statement-recorder.ts:
 * nothing runs; each statement is answered with sample rows, so a function can be followed past it),
 * with fixed sample inputs, and this test fails when the compiled text and the committed file differ.
 * `npm run sql` (UPDATE_SQL=1) rewrites them, and removes files no statement here writes.
 */
const DIR = path.join('src', 'jobs', 'sql');
const UPDATE = process.env.UPDATE_SQL === '1';

const TOKEN = '3f0e9a52-6a43-4a0c-9d4e-52d1b6e0c001';
const TOKEN_2 = '3f0e9a52-6a43-4a0c-9d4e-52d1b6e0c002';
const AT = new Date('2025-01-01T12:00:00.000Z');
const LEASE_MS = 30_000;
/** Ids 4097 and 4100 are in the ring's slot 1 (job_slot: 4,096 ids a slot), 9000 in slot 2. */
const SAME_SLOT = [
  { id: '4097', leaseToken: TOKEN },
  { id: '4100', leaseToken: TOKEN_2 },
];

/** The signal row a claim statement answers to send the claim on to the next statement. */
const diverted = () => [{ claimant: null, signal: Signal.divert, meta: null }];

/** A claimed row as the claim statements answer it. */
const claimedRow = (claimant: number, id: string, group: string) => ({
  claimant: String(claimant),
  signal: null,
  id,
  queue: 'q',
  group_key: group,
  payload_json: '{}',
  priority: 0,
  attempts: 1,
  max_attempts: 5,
  lease_token: TOKEN,
  lease_expires_at: AT,
  deadline_at: null,
  claimed_at: AT,
  run_at: AT,
  created_at: AT,
  meta: null,
});

/** baton.flow_budget's answer for a limited queue whose ready jobs have groups (the walk). */
const budget = (lastGroup: string | null) => ({
  flow_controlled: true,
  limited: true,
  overrides: false,
  walk: true,
  blank_only: true,
  n: 10,
  reason: null,
  retry_after_ms: null,
  read_at: AT,
  in_flight: 2,
  concurrency_limit: 50,
  last_group: lastGroup,
  group_concurrency_limit: 2,
  group_rate_limit: null,
  group_rate_period_ms: null,
  rate_period_ms: 60_000,
  claim_times: null,
  claim_counts: null,
  blank_rate_period_ms: null,
  blank_claim_times: null,
  blank_claim_counts: null,
});

/** Two groups the walk found, the second after wrapping round past the last name. */
const visits = [
  { group_key: 'c', wrapped: false },
  { group_key: 'a', wrapped: true },
].map((g) => ({
  ...g,
  paused: false,
  concurrency_limit: 2,
  rate_period_ms: null,
  weight: 1,
  in_flight: 0,
  ready: 64,
  rate_room: null,
  rate_retry_after_ms: null,
}));

/** The statements of a flow claim answered in turn: diverted three times, then the walk's transaction. */
const flowAnswers =
  (lastGroup: string | null): Answer =>
  (_, i) =>
    [
      diverted(),
      diverted(),
      diverted(),
      [budget(lastGroup)],
      visits,
      [claimedRow(1, '4097', 'c'), claimedRow(1, '4098', 'a')],
    ][i];

/** The `index`-th statement `run` sends, answered by `answer`. */
async function nth(index: number, run: Parameters<typeof recordStatements>[0], answer?: Answer) {
  const statements = await recordStatements(run, answer);
  const statement = statements[index];
  if (!statement) throw new Error(`expected at least ${index + 1} statements, got ${statements.length}`);
  return statement;
}

const claimants = [
  { maxJobs: 10, leaseMs: 60_000, workerId: 'worker-1' },
  { maxJobs: 5, workerId: 'worker-2' },
];
const claim = (queue: string) => (db: Parameters<typeof claimForGroup>[0]) =>
  claimForGroup(db, queue, LEASE_MS, claimants);

const claimFromFloor = (queue: string) => (db: Parameters<typeof claimForGroup>[0]) => {
  const floors = new ClaimFloors();
  floors.set({ [queue]: { priority: 0, runAt: '2026-01-02 03:04:05.123456+00' } }, 60_000);
  return claimForGroup(db, queue, LEASE_MS, claimants, floors);
};

const enqueueOptions = {
  autoCreate: { enabled: false, maxQueues: 10_000 },
  defaultMaxAttempts: 5,
  idempotencyRetentionMs: 86_400_000,
};

const nackAnswers: Answer = (_, i) =>
  i === 0
    ? [
        {
          slot: 1,
          attempts: 1,
          max_attempts: 5,
          worker_id: 'worker-1',
          now: AT,
          backoff_base_ms: null,
          backoff_max_ms: null,
          backoff_jitter: null,
        },
      ]
    : undefined;
const nack = (input: Partial<Parameters<typeof nackJob>[1]>) => (db: Parameters<typeof nackJob>[0]) =>
  nackJob(
    db,
    { id: '4097', leaseToken: TOKEN, error: { message: 'failed' }, ...input },
    {
      defaultLeaseMs: LEASE_MS,
      defaultMaxAttempts: 5,
      backoffBaseMs: 1_000,
      backoffMaxMs: 60_000,
      backoffJitter: false,
      completedRetentionMs: 86_400_000,
      deadRetentionMs: 86_400_000,
    },
  );

/** Every file of src/jobs/sql/: what it holds, and the statement, recorded. */
const FILES: Record<string, { about: string; statement: () => Promise<CompiledQuery> }> = {
  'claim-plain.sql': {
    about: 'The claim of a queue without flow control (two claimants of 10 and 5 jobs).',
    statement: () => nth(0, claim('q-plain')),
  },
  'claim-plain-from-floor.sql': {
    about:
      "The claim of a queue without flow control from the leader's floor, while readers pin the ring (src/jobs/claim/floors.ts).",
    statement: () => nth(0, claimFromFloor('q-floor')),
  },
  'claim-grouped.sql': {
    about: 'The claim of a grouped queue without limits or overrides: the groups in turn.',
    statement: () => nth(1, claim('q-grouped'), (_, i) => (i === 0 ? diverted() : undefined)),
  },
  'claim-limited.sql': {
    about: 'The claim of a limited queue whose ready jobs have no group: its budget from baton.flow_budget.',
    statement: () => nth(2, claim('q-limited'), (_, i) => (i < 2 ? diverted() : undefined)),
  },
  'claim-flow-budget.sql': {
    about: "The flow claim's transaction, 1: the queue's lock and budget (baton.flow_budget).",
    statement: () => nth(3, claim('q-flow-budget'), flowAnswers('b')),
  },
  'claim-flow-walk.sql': {
    about: "The flow claim's transaction, 2: the groups with ready jobs, after the group served last.",
    statement: () => nth(4, claim('q-flow-walk'), flowAnswers('b')),
  },
  'claim-flow-walk-first.sql': {
    about:
      "The flow claim's transaction, 2: the groups with ready jobs, for a queue no claim has served yet.",
    statement: () => nth(4, claim('q-flow-walk-first'), flowAnswers(null)),
  },
  'claim-flow-pick.sql': {
    about: "The flow claim's transaction, 3: the claim of each group's share (two groups, 2 jobs each).",
    statement: () => nth(5, claim('q-flow-pick'), flowAnswers('b')),
  },
  'claim-flow-record.sql': {
    about:
      "The flow claim's transaction, 4: the claim recorded in the rate windows, and the group served last.",
    statement: () => nth(6, claim('q-flow-record'), flowAnswers('b')),
  },
  'claim-release.sql': {
    about: 'Claimed jobs given back, as if never claimed (the client of a long-poll went away).',
    statement: () => nth(0, (db) => releaseClaims(db, [{ id: '4097', lease_token: TOKEN }])),
  },
  'ack-own-slot.sql': {
    about: "Single acks (grouped into one statement), in their ids' one slot.",
    statement: () => nth(0, (db) => ackEach(db, SAME_SLOT)),
  },
  'ack-every-slot.sql': {
    about: 'Single acks, again in every slot for those the first statement missed (jobs the leader carried).',
    statement: () => nth(1, (db) => ackEach(db, SAME_SLOT)),
  },
  'ack-batch-own-slot.sql': {
    about: "A batch ack (POST /v1/jobs/ack), in its ids' one slot.",
    statement: () => nth(0, (db) => ackBriefEach(db, SAME_SLOT)),
  },
  'ack-batch-every-slot.sql': {
    about: 'A batch ack, again in every slot for the items the first statement missed.',
    statement: () => nth(1, (db) => ackBriefEach(db, SAME_SLOT)),
  },
  'ack-progress-own-slot.sql': {
    about:
      "Single acks in which some ack carries its final progress (ack's `progress`), in their ids' one slot; " +
      "an ack without it keeps the job's.",
    statement: () =>
      nth(0, (db) => ackEach(db, [{ ...SAME_SLOT[0]!, progressJson: '{"done":4,"of":4}' }, SAME_SLOT[1]!])),
  },
  'ack-batch-progress-own-slot.sql': {
    about: "A batch ack in which some item carries its final progress, in its ids' one slot.",
    statement: () =>
      nth(0, (db) => ackBriefEach(db, [SAME_SLOT[0]!, { ...SAME_SLOT[1]!, progressJson: 'null' }])),
  },
  'ack-and-claim-progress.sql': {
    about: 'Single acks with `next` in which some ack carries its final progress, in one statement.',
    statement: () =>
      nth(0, (db) =>
        ackAndClaimEach(db, LEASE_MS, [
          { ...SAME_SLOT[0]!, progressJson: '{"done":4,"of":4}', next: { maxJobs: 1 } },
          { ...SAME_SLOT[1]!, next: { maxJobs: 2 } },
        ]),
      ),
  },
  'ack-and-claim.sql': {
    about:
      "Single acks with `next`: the acks and the plain claim of the acked jobs' queues, in one statement.",
    statement: () =>
      nth(0, (db) =>
        ackAndClaimEach(db, LEASE_MS, [
          { ...SAME_SLOT[0]!, next: { maxJobs: 1 } },
          {
            ...SAME_SLOT[1]!,
            resultJson: '{"ok":true}',
            next: { maxJobs: 2, leaseMs: 60_000, workerId: 'w' },
          },
        ]),
      ),
  },
  'queues-of-jobs-own-slot.sql': {
    about:
      "The queue of each job of a batch (a batch ack with `next`, auth for a queue-limited key), in its ids' " +
      'one slot; only ids not found there are looked for in every table.',
    statement: () =>
      nth(0, (db) =>
        queuesOfJobs(
          db,
          SAME_SLOT.map((item) => item.id),
        ),
      ),
  },
  'renew-own-slot.sql': {
    about: "A batch renew (one renewal is a batch of one), in its ids' one slot.",
    statement: () =>
      nth(0, (db) =>
        renewLeases(db, [
          { ...SAME_SLOT[0]!, leaseMs: 60_000 },
          { ...SAME_SLOT[1]!, queue: 'q' },
        ]),
      ),
  },
  'renew-progress-own-slot.sql': {
    about:
      "A batch renew in which some item carries progress (renew's `progress`), in its ids' one slot; " +
      "an item without it keeps the job's.",
    statement: () =>
      nth(0, (db) =>
        renewLeases(db, [
          { ...SAME_SLOT[0]!, progressJson: '{"done":3,"of":4}' },
          { ...SAME_SLOT[1]!, leaseMs: 60_000 },
        ]),
      ),
  },
  'renew-every-slot.sql': {
    about: 'A batch renew, again in every slot for the items the first statement missed.',
    statement: () => nth(1, (db) => renewLeases(db, SAME_SLOT)),
  },
  'nack-lock.sql': {
    about: "A nack, 1: the claimed row locked by its token, in its id's slot.",
    statement: () => nth(0, nack({}), nackAnswers),
  },
  'nack-retry.sql': {
    about: 'A nack, 2: claimable again at once (retry_in_ms 0), in place.',
    statement: () => nth(1, nack({ retryInMs: 0 }), nackAnswers),
  },
  'nack-later.sql': {
    about: 'A nack, 2: a retry later, moved to baton.scheduled_jobs.',
    statement: () => nth(1, nack({ retryInMs: 5_000 }), nackAnswers),
  },
  'nack-give-back.sql': {
    about: 'A nack, 2: the job given back (give_back): ready in place, the attempt uncounted, no error.',
    statement: () => nth(1, nack({ error: undefined, giveBack: true }), nackAnswers),
  },
  'nack-dead.sql': {
    about: 'A nack, 2: dead, moved to baton.job_history.',
    statement: () => nth(1, nack({ dead: true }), nackAnswers),
  },
  'enqueue-plain.sql': {
    about:
      'An enqueue (one job or a batch): jobs due now into the ring, later ones into baton.scheduled_jobs.',
    statement: () =>
      nth(0, (db) =>
        enqueueJobs(
          db,
          'q',
          [
            { payloadJson: '{"n":1}', priority: 0 },
            { payloadJson: '{"n":2}', priority: 5, delayMs: 60_000, group: 'g' },
          ],
          enqueueOptions,
        ),
      ),
  },
  'enqueue-gated.sql': {
    about: "An enqueue whose items have unique keys: each key's row first, a job only for the keys it got.",
    statement: () =>
      nth(0, (db) =>
        enqueueJobs(
          db,
          'q',
          [
            { payloadJson: '{"n":1}', priority: 0, uniqueKey: 'k1' },
            { payloadJson: '{"n":2}', priority: 0 },
          ],
          enqueueOptions,
        ),
      ),
  },
};

/** A parameter as the header shows it: text quoted as SQL writes it, anything else as JSON. */
const shown = (value: unknown) =>
  typeof value === 'string'
    ? `'${value.replaceAll("'", "''")}'`
    : value instanceof Date
      ? `'${value.toISOString()}'`
      : JSON.stringify(value ?? null);

function fileText(name: string, about: string, statement: CompiledQuery): string {
  const header = [
    `-- ${about}`,
    '-- The statement as the server sends it, recorded with the sample values below by',
    `-- test/jobs/sql-files.test.ts; \`npm run sql\` rewrites this file (${name}).`,
    ...statement.parameters.map((p, i) => `-- $${i + 1} = ${shown(p)}`),
  ];
  return `${header.join('\n')}\n${statement.sql};\n`;
}

describe('the committed SQL files (src/jobs/sql/)', () => {
  for (const [name, { about, statement }] of Object.entries(FILES)) {
    it(`${name} is the statement the server sends`, async () => {
      const text = fileText(name, about, await statement());
      const file = path.join(DIR, name);
      if (UPDATE) {
        fs.mkdirSync(DIR, { recursive: true });
        fs.writeFileSync(file, text);
        return;
      }
      const committed = fs.existsSync(file) ? fs.readFileSync(file, 'utf8') : '(no such file)';
      expect(committed, `${file} differs from the compiled statement: run \`npm run sql\``).toBe(text);
    });
  }

  it('holds no file that no statement writes', () => {
    const stale = fs.existsSync(DIR)
      ? fs.readdirSync(DIR).filter((f) => f.endsWith('.sql') && !(f in FILES))
      : [];
    if (UPDATE) {
      for (const f of stale) fs.rmSync(path.join(DIR, f));
      return;
    }
    expect(stale, 'run `npm run sql` to remove them').toEqual([]);
  });
});
