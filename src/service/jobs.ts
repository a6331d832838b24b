import type { Config } from '../config.js';
import type { Db } from '../db/database.js';
import { retryOnLostConnection } from '../db/lost-connection.js';
import { tooManyWaiters } from '../errors.js';
import { FINISHED_STATES, type JobState } from '../job-states.js';
import { type AwaitAnswer, awaitedStates, readAwaitAnswer } from '../jobs/awaited.js';
import { releaseClaims } from '../jobs/claim/release.js';
import type { Claimant, ClaimedRow } from '../jobs/claim/types.js';
import type { EnqueueItem, EnqueueOptions, EnqueueResult } from '../jobs/enqueue/enqueue.js';
import type { ParentScope } from '../jobs/enqueue/parents.js';
import { checkEnqueue } from '../jobs/enqueue/rules.js';
import { enqueueWithParents } from '../jobs/enqueue/with-parents.js';
import {
  type DependencySummary,
  dependencySummary,
  type JobGraph,
  jobGraph,
  type RelatedPage,
  relatedJobs,
} from '../jobs/graph.js';
import type { JobRow } from '../jobs/job-row.js';
import type { ScopedId } from '../jobs/lease-outcome.js';
import { GRAPH_MAX_JOBS } from '../jobs/limits.js';
import { countJobs, type ListOptions, listJobs } from '../jobs/list.js';
import { getJob } from '../jobs/read.js';
import { type ReceiveAttempt, recordReceive, replayReceive } from '../jobs/receive-attempts.js';
import {
  countFailures,
  type FailureListOptions,
  findByKey,
  type JobKey,
  listFailures,
} from '../jobs/search.js';
import { ClaimGroups, EnqueueGroups } from '../jobs/statement-groups.js';
import { type TraceContext, traceOf } from '../jobs/trace-context.js';
import type { Log } from '../logger.js';
import type { Metrics } from '../metrics/metrics.js';
import { distinctTraces, inSpan, messagingAttributes, recorded, type Tracing } from '../tracing/tracing.js';
import { awaitFinished } from '../wake/await-finish.js';
import type { AwaitSlots } from '../wake/await-slots.js';
import { claimWithWait } from '../wake/long-poll.js';
import type { Notifier } from '../wake/notifier.js';
import type { WaitList } from '../wake/wait-list.js';
import type { WorkerUseCases } from './workers.js';

/** What the use cases work with: built once per replica (plugins/service.ts). */
export interface ServiceDeps {
  db: Db;
  /** The replica's logger, for what happens below a request (a statement run again). */
  log: Log;
  config: Config;
  metrics: Metrics;
  /** Baton's spans (tracing/): NO_TRACING unless an OTLP endpoint is configured. */
  tracing: Tracing;
  notifier: Notifier;
  waitList: WaitList;
  /** The caps on requests awaiting jobs (per key and per replica). */
  awaitSlots: AwaitSlots;
  /** True from the moment the server begins to close: long-polls return at once. */
  shuttingDown: () => boolean;
}

/**
 * How an enqueue treats what it was not told: the native API creates an unknown queue (unless the
 * server runs with auto-create off) and keeps idempotency keys BATON_IDEMPOTENCY_RETENTION_MS; SQS
 * never creates a queue on send; an SQS FIFO queue's deduplication ids are idempotency keys kept
 * SQS's five minutes.
 */
export type EnqueuePolicy = 'api' | 'sqs' | 'sqs-fifo';

/** What an enqueue with `depends_on` needs of its request. */
export interface EnqueueRequestContext {
  /** The queues whose jobs the caller may name as parents (a queue-limited key's patterns). */
  parentScope?: ParentScope;
  /** The field prefix of item i in error messages (`jobs[i].` in a batch). */
  field?: (index: number) => string;
  /** A batch request: its items may name earlier items as parents (`depends_on: [{"item": 0}]`). */
  batch?: boolean;
  /** The request's trace context (its traceparent header): the enqueue span's parent. */
  trace?: TraceContext;
}

/** SQS's deduplication interval: a FIFO message's deduplication id is remembered five minutes. */
export const SQS_DEDUPLICATION_MS = 5 * 60_000;

/** A claim of a request: its claimant, how long it may wait, and what tells it the client has gone. */
export interface ClaimCall extends Claimant {
  queue: string;
  waitMs: number;
  /** Aborted when the client goes away: the wait ends, and jobs claimed meanwhile are given back. */
  signal: AbortSignal;
  log: Log;
  /** The request's trace context (its traceparent header): the claim span's parent. */
  trace?: TraceContext;
}

/** Jobs awaited until they finish (GET /v1/jobs/{id}?wait_ms, POST /v1/jobs/await). */
export interface AwaitCall {
  /** Each job, with the queue a queue-limited key may see it in (undefined: any queue). */
  items: ScopedId[];
  waitMs: number;
  /** Who waits, for the caps per key: the API key's name ('' without keys). */
  key: string;
  /** Aborted when the client goes away: the wait ends. */
  signal: AbortSignal;
}

const FINISHED: ReadonlySet<JobState> = new Set(FINISHED_STATES);

/** `item`, carrying `carried` unless it has a trace of its own other than `parent`. */
function carrying(item: EnqueueItem, parent: TraceContext | undefined, carried: TraceContext): EnqueueItem {
  const own = traceOf(item.meta);
  if (own !== undefined && own.traceparent !== parent?.traceparent) return item;
  const meta = item.meta && typeof item.meta === 'object' ? item.meta : {};
  return { ...item, meta: { ...meta, trace: carried } };
}

/**
 * The job use cases of one replica, whichever protocol asks (routes/, sqs/): each does its writes
 * through the replica's only group-commit batchers (jobs/statement-groups.ts), then counts them in
 * the metrics and wakes whom they concern (waiting claims here and on other replicas).
 */
export class JobUseCases {
  private readonly enqueues: Record<EnqueuePolicy, EnqueueGroups>;
  private readonly claims: ClaimGroups;
  /** The claim groups, each claim run again once if its connection was lost (see again()). */
  private readonly retriedClaims: Pick<ClaimGroups, 'claim'>;
  /** How the native API enqueues (auto-create, attempts, idempotency retention), from config. */
  readonly enqueueOptions: EnqueueOptions;

  constructor(
    private readonly deps: ServiceDeps,
    private readonly workers?: WorkerUseCases,
  ) {
    const { db, config } = deps;
    const base: EnqueueOptions = {
      autoCreate: { enabled: config.autoCreateQueues, maxQueues: config.maxAutoQueues },
      defaultMaxAttempts: config.defaultMaxAttempts,
      idempotencyRetentionMs: config.idempotencyRetentionMs,
    };
    this.enqueueOptions = base;
    const sqs = { ...base, autoCreate: { enabled: false, maxQueues: config.maxAutoQueues } };
    // Concurrent enqueues of a queue share one statement; the three policies group apart, since a
    // statement has one policy.
    this.enqueues = {
      api: new EnqueueGroups(db, base),
      sqs: new EnqueueGroups(db, sqs),
      'sqs-fifo': new EnqueueGroups(db, { ...sqs, idempotencyRetentionMs: SQS_DEDUPLICATION_MS }),
    };
    this.claims = new ClaimGroups(db, config.defaultLeaseMs, deps.notifier.floors);
    this.retriedClaims = { claim: (opts) => this.again('claim', () => this.claims.claim(opts)) };
  }

  /**
   * Run again once if the connection was lost (db/lost-connection.ts): for use cases that may run
   * twice without a second effect. Reads; claims (one that committed unanswered only delays its jobs
   * until their leases expire); enqueues whose every item has an idempotency key. Not an enqueue
   * without keys (a first run that committed unanswered would be doubled). Cancels too (a cancelled job's
   * cancel answers it again); a nack reads its receipt back first (service/leases.ts).
   */
  again<T>(what: string, run: () => Promise<T>): Promise<T> {
    return retryOnLostConnection(this.deps.log, what, run);
  }

  /**
   * Enqueue jobs into a queue; per item, its job and whether this call created it (an idempotency
   * or unique key may answer an existing job). Items that break a rule are refused first, with
   * nothing written (jobs/enqueue-rules.ts). Created jobs are counted, and those ready now wake
   * waiting claims.
   */
  async enqueue(
    queue: string,
    items: EnqueueItem[],
    policy: EnqueuePolicy = 'api',
    request: EnqueueRequestContext = {},
  ): Promise<EnqueueResult[]> {
    const { tracing } = this.deps;
    if (!tracing.enabled) return this.write(queue, items, policy, request);
    // The span continues the request's trace, or a lone job's own. Each job whose trace is that one
    // (or that has none) carries the span's context to its workers instead, so a trace reads producer,
    // Baton's enqueue, then the worker; a job of a batch with a trace of its own keeps it, linked.
    const parent = request.trace ?? (items.length === 1 ? traceOf(items[0]!.meta) : undefined);
    return inSpan(
      tracing,
      `enqueue ${queue}`,
      () => ({
        kind: 'producer',
        parent,
        links: distinctTraces(
          items.map((item) => traceOf(item.meta)),
          parent,
        ),
        attributes: {
          ...messagingAttributes('enqueue', 'send', queue),
          ...(items.length > 1 ? { 'messaging.batch.message_count': items.length } : {}),
        },
      }),
      async (span) => {
        const carried = span.context;
        const results = await this.write(
          queue,
          carried ? items.map((item) => carrying(item, parent, carried)) : items,
          policy,
          request,
        );
        if (results.length === 1) span.set({ 'messaging.message.id': results[0]!.job.id });
        return results;
      },
    );
  }

  private async write(
    queue: string,
    items: EnqueueItem[],
    policy: EnqueuePolicy,
    request: EnqueueRequestContext,
  ): Promise<EnqueueResult[]> {
    const field = request.field ?? ((i: number) => (items.length === 1 ? '' : `jobs[${i}].`));
    await this.again('check an enqueue', () =>
      checkEnqueue(this.deps.db, items, field, request.batch ?? items.length > 1),
    );
    // Jobs with parents take a transaction of their own (jobs/dependencies.ts); the others keep
    // their one grouped statement.
    const grouped = () => this.enqueues[policy].enqueue(queue, items);
    const results = items.some((item) => item.dependsOn !== undefined)
      ? await enqueueWithParents(this.deps.db, queue, items, this.enqueueOptions, request.parentScope, field)
      : items.every((item) => item.idempotencyKey !== undefined)
        ? // Each item's key answers the job a first run created, if it did: run again, nothing doubles.
          await this.again('enqueue with idempotency keys', grouped)
        : await grouped();
    this.enqueued(queue, results);
    return results;
  }

  /**
   * Jobs enqueued into a queue, here or in a caller's own transaction (a schedule's occurrence):
   * those created are counted, and those ready now wake waiting claims.
   */
  enqueued(queue: string, results: EnqueueResult[]): void {
    let created = 0;
    let ready = 0;
    for (const r of results) {
      if (!r.created) continue;
      created++;
      if (r.job.state === 'ready') ready++;
    }
    this.deps.metrics.enqueued(queue, created);
    if (ready > 0) this.deps.notifier.jobsReady(queue, ready);
  }

  /** A job in any state; with `queue` (a queue-limited key's scope), only a job of that queue. */
  read(id: string, queue?: string): Promise<JobRow | undefined> {
    return this.again('read a job', () => getJob(this.deps.db, id, queue));
  }

  /** A page of a queue's jobs in one state, by keyset (jobs/list.ts). */
  list(opts: ListOptions) {
    return this.again('list jobs', () => listJobs(this.deps.db, opts));
  }

  /** How many jobs a queue's list holds, counted up to `max + 1`. */
  countList(opts: Pick<ListOptions, 'queue' | 'state' | 'group'>, max: number): Promise<number> {
    return this.again('count jobs', () => countJobs(this.deps.db, opts, max));
  }

  /** The jobs a unique or idempotency key names, in the queues the caller may see. */
  findByKey(key: JobKey, opts: { queue?: string; patterns?: string[] }): Promise<JobRow[]> {
    return this.again('find jobs by key', () => findByKey(this.deps.db, key, opts));
  }

  /** A page of failing or dead jobs across queues, newest failure first (jobs/search.ts). */
  failures(opts: FailureListOptions) {
    return this.again('list failures', () => listFailures(this.deps.db, opts));
  }

  /** How many jobs a failure list holds, counted up to `max` (a bulk action's cap). */
  countFailures(opts: Omit<FailureListOptions, 'limit' | 'after'>, max: number): Promise<number> {
    return this.again('count failures', () => countFailures(this.deps.db, opts, max));
  }

  /**
   * A job's dependencies (parents, pending, failed, policy); undefined for a job without parents. With
   * `scope`, only parents of queues the caller may see count.
   */
  dependencies(id: string, scope: ParentScope): Promise<DependencySummary | undefined> {
    return this.again('read dependencies', () => dependencySummary(this.deps.db, id, scope));
  }

  /**
   * A page of a job's parents (each with its result once completed: the fan-in of a claimed child) or
   * children, in id order; with `scope`, only those of queues the caller may see.
   */
  related(
    id: string,
    direction: 'parents' | 'children',
    opts: { after?: string; limit: number; scope?: ParentScope },
  ): Promise<RelatedPage> {
    return this.again('read related jobs', () =>
      relatedJobs(this.deps.db, id, direction, { ...opts, scope: opts.scope }),
    );
  }

  /**
   * The workflow graph `start` belongs to, nearest jobs first, up to GRAPH_MAX_JOBS (the dashboard
   * draws it); with `scope`, only through jobs of queues the caller may see.
   */
  graph(start: { id: string; queue: string }, scope: ParentScope): Promise<JobGraph> {
    return this.again('read job graph', () =>
      jobGraph(this.deps.db, start, { limit: GRAPH_MAX_JOBS, scope }),
    );
  }

  /**
   * Jobs by id (those that exist in the caller's scope), once every one of them has finished, or as
   * they are when the wait ends (waitMs, the client leaving, shutdown). Waiting holds no connection
   * and reads nothing of its own (wake/await-finish.ts): an ack, nack or cancel of one of them here
   * wakes it at once, one on another replica through a notice sent only because this replica said it
   * awaits the job, and the replica's one poll finds any end neither told. The rows are read once,
   * when the answer is due, their bodies within BATON_AWAIT_ANSWER_MAX_BYTES (jobs/awaited.ts). A
   * key (or the replica) at its cap of waiters is refused: 429 too_many_waiters.
   */
  async awaitFinished(call: AwaitCall): Promise<AwaitAnswer> {
    const { db, notifier, config, awaitSlots } = this.deps;
    const readAnswer = () =>
      this.again('read awaited jobs', () => readAwaitAnswer(db, call.items, config.awaitAnswerMaxBytes));
    const waitMs = this.deps.shuttingDown() ? 0 : call.waitMs;
    if (waitMs === 0 || call.items.length === 0) return readAnswer();
    const slot = awaitSlots.take(call.key, call.items.length);
    if ('refused' in slot) throw tooManyWaiters(slot.refused);
    try {
      return await awaitFinished(notifier, {
        items: call.items,
        readStates: () => this.again('read awaited states', () => awaitedStates(db, call.items)),
        readAnswer,
        isFinished: (state) => FINISHED.has(state as JobState),
        waitMs,
        signal: call.signal,
      });
    } finally {
      slot.release();
    }
  }

  /**
   * Claim for a request, waiting up to waitMs for work (holding no connection, wake/long-poll.ts):
   * the claim route, ack-and-claim's `next` and SQS ReceiveMessage all claim through here, so flow
   * control, paused queues, long-poll, shutdown and a client that goes away behave the same on
   * each. Jobs claimed for a client that has gone are given back at once.
   */
  claim(call: ClaimCall): Promise<ClaimedRow[]> {
    // The span covers the wait too, and links the jobs it handed out (each job's trace, which its
    // worker continues).
    return recorded(
      this.deps.tracing,
      () => this.claimRows(call),
      (rows) => ({
        name: `claim ${call.queue}`,
        kind: 'consumer',
        parent: call.trace,
        links: distinctTraces((rows ?? []).map((row) => traceOf(row.meta))),
        attributes: {
          ...messagingAttributes('claim', 'receive', call.queue),
          'messaging.batch.message_count': rows?.length ?? 0,
        },
      }),
    );
  }

  private async claimRows(call: ClaimCall): Promise<ClaimedRow[]> {
    const { metrics, notifier, waitList, config } = this.deps;
    const { jobs: rows } = await claimWithWait(this.retriedClaims, waitList, {
      queue: call.queue,
      maxJobs: call.maxJobs,
      leaseMs: call.leaseMs,
      workerId: call.workerId,
      ...(call.wholeGroups ? { wholeGroups: true } : {}),
      waitMs: this.deps.shuttingDown() ? 0 : call.waitMs,
      pollIntervalMs: config.pollIntervalMs,
      signal: call.signal,
      onHeldBack: (held) => {
        metrics.claimsHeldBack.inc({ queue: metrics.queue(call.queue), reason: held.reason });
        notifier.watchSlots(call.queue);
      },
    });
    if (call.signal.aborted && rows.length > 0) return this.giveBack(call, rows);
    metrics.claimed(call.queue, rows);
    if (call.workerId !== undefined) this.workers?.seen(call.workerId, call.queue);
    return rows;
  }

  /**
   * A claim that may be sent again (an SQS FIFO receive with a ReceiveRequestAttemptId): sent again
   * within the window, it answers the jobs it handed out, under the same leases, renewed; `stale` when
   * one of them was deleted, released, changed or timed out since (jobs/receive-attempts.ts). Else it
   * is claim(), and what it hands out is kept (in PostgreSQL: any replica may get the repeat).
   */
  async claimOnce(call: ClaimCall, attempt: ReceiveAttempt): Promise<ClaimedRow[] | 'stale'> {
    const replayed = await replayReceive(this.deps.db, attempt, call.leaseMs);
    if (replayed !== undefined) return replayed;
    const rows = await this.claim(call);
    try {
      await recordReceive(this.deps.db, attempt, rows);
    } catch (err) {
      // The jobs are claimed and answered all the same; only a repeat of this receive will not find them.
      call.log.warn({ err }, 'could not keep what a receive with an attempt id handed out');
    }
    return rows;
  }

  /**
   * Hand out jobs a statement other than the claim's claimed for a request (ack-and-claim in one
   * statement, jobs/ack-and-claim.ts), as claim() would: given back if the client has gone, counted,
   * and a full batch passes the baton to the queue's next long-poll.
   */
  async handOut(call: Omit<ClaimCall, 'waitMs'>, rows: ClaimedRow[]): Promise<ClaimedRow[]> {
    if (rows.length === 0) return rows;
    if (call.signal.aborted) return this.giveBack(call, rows);
    this.deps.metrics.claimed(call.queue, rows);
    if (rows.length === call.maxJobs) this.deps.waitList.wake(call.queue, 1);
    return rows;
  }

  /** Jobs claimed for a client that went away: nobody will receive these leases, so they go back. */
  private async giveBack(call: Pick<ClaimCall, 'queue' | 'log'>, rows: ClaimedRow[]): Promise<ClaimedRow[]> {
    const released = await releaseClaims(this.deps.db, rows);
    call.log.info({ released }, 'claimant went away; released its jobs');
    this.deps.notifier.jobsReady(call.queue, released);
    return [];
  }
}
