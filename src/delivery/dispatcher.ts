import http from 'node:http';
import https from 'node:https';
import os from 'node:os';
import type { Db } from '../db/database.js';
import { LEASE_MS_MAX, LEASE_MS_MIN } from '../duration-limits.js';
import type { ClaimedRow } from '../jobs/claim/types.js';
import { type TraceContext, traceOf } from '../jobs/trace-context.js';
import type { Log } from '../logger.js';
import type { Metrics } from '../metrics/metrics.js';
import type { PushAllowList } from '../push/allow-list.js';
import { type DeliveryAnswer, deliver } from '../push/deliver.js';
import { actionOf, type PushAction } from '../push/outcome.js';
import { SIGNATURE_HEADER, signatureHeader } from '../push/signature.js';
import { PushWindow } from '../push/window.js';
import { listPushEndpoints, type PushEndpointRow } from '../queues/push-store.js';
import type { Service } from '../service/service.js';
import { messagingAttributes, type Tracing } from '../tracing/tracing.js';
import { BATON_VERSION } from '../version.js';

/** How often each replica reads the push endpoints (a new or changed one is served within this). */
const REFRESH_MS = 2000;
/** How long one claim of a push queue waits for jobs (woken at once by an enqueue, as any long-poll). */
const CLAIM_WAIT_MS = 5000;
/** A lease outlives the request's timeout by this much, so a delivery's answer always finds it held. */
const LEASE_MARGIN_MS = 5000;
/** Jobs claimed at once, at most, when the window has that much room. */
const CLAIM_MAX = 100;

export interface DispatcherDeps {
  db: Db;
  service: Pick<Service, 'jobs' | 'leases'>;
  allowList: PushAllowList;
  metrics: Metrics;
  log: Log;
  /** The most of an answer's body read (a result is at most this: BATON_PAYLOAD_LIMIT_BYTES). */
  maxAnswerBytes: number;
  /** Each delivery's span (tracing/); NO_TRACING unless an OTLP endpoint is configured. */
  tracing: Tracing;
}

/**
 * Push delivery (docs/push.md), on every replica: for each push queue, claim its jobs under a lease
 * as a worker would (flow control, groups and rate limits apply to these claims as to any), POST
 * each to the endpoint, and ack or nack it by the answer (outcome.ts). The lease is what makes it
 * safe: a replica that dies mid-delivery holds nothing the leader's re-arm does not hand on, so a
 * job is delivered at least once and acked once. Each replica keeps its own window of deliveries in
 * flight per queue (window.ts).
 */
export class PushDispatcher {
  private readonly queues = new Map<string, QueuePusher>();
  private timer: NodeJS.Timeout | undefined;
  private stopped = false;
  readonly workerId = `push:${os.hostname()}:${process.pid}`;

  constructor(private readonly deps: DispatcherDeps) {}

  start(): void {
    const tick = async () => {
      await this.refresh().catch((err) =>
        this.deps.log.warn({ error: (err as Error).message }, 'push: could not read the push endpoints'),
      );
      if (!this.stopped) this.timer = setTimeout(tick, REFRESH_MS);
    };
    void tick();
  }

  /** Read the endpoints; start, update or stop each queue's pusher. Answers how many queues are served. */
  async refresh(): Promise<number> {
    const rows = await listPushEndpoints(this.deps.db);
    if (this.stopped) return 0;
    const seen = new Set<string>();
    for (const row of rows) {
      seen.add(row.queue);
      const pusher = this.queues.get(row.queue);
      if (pusher) pusher.update(row);
      else {
        const p = new QueuePusher(row, this.deps, this.workerId);
        this.queues.set(row.queue, p);
        p.start();
      }
    }
    for (const [queue, pusher] of this.queues) {
      if (!seen.has(queue)) {
        this.queues.delete(queue);
        void pusher.stop();
      }
    }
    return rows.length;
  }

  /** Stop claiming; deliveries in flight are ended and their jobs given back for another replica. */
  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    await Promise.all([...this.queues.values()].map((p) => p.stop()));
    this.queues.clear();
  }
}

/** One push queue on one replica. */
class QueuePusher {
  private readonly window: PushWindow;
  private readonly inFlight = new Set<Promise<void>>();
  private readonly abort = new AbortController();
  private loop: Promise<void> | undefined;
  /**
   * Connections kept open to the endpoint between deliveries: a new one per delivery cost Baton
   * twice a pull worker's CPU per job (bench/push.ts).
   */
  private readonly agents = {
    'http:': new http.Agent({ keepAlive: true }),
    'https:': new https.Agent({ keepAlive: true }),
  };

  constructor(
    private endpoint: PushEndpointRow,
    private readonly deps: DispatcherDeps,
    private readonly workerId: string,
  ) {
    this.window = new PushWindow(endpoint.concurrency);
  }

  update(row: PushEndpointRow): void {
    if (row.concurrency !== this.endpoint.concurrency) this.window.setMax(row.concurrency);
    this.endpoint = row;
  }

  start(): void {
    this.loop = this.run();
  }

  async stop(): Promise<void> {
    this.abort.abort();
    await this.loop;
    await Promise.all(this.inFlight);
    this.agents['http:'].destroy();
    this.agents['https:'].destroy();
  }

  private get queue() {
    return this.endpoint.queue;
  }

  private async run(): Promise<void> {
    const { signal } = this.abort;
    const { metrics, log } = this.deps;
    while (!signal.aborted) {
      const pause = this.window.pausedUntil - Date.now();
      if (pause > 0) {
        await sleep(pause, signal);
        continue;
      }
      metrics.pushWindow.set({ queue: metrics.queue(this.queue) }, this.window.slots);
      const free = this.window.slots - this.inFlight.size;
      if (free <= 0) {
        await Promise.race(this.inFlight);
        continue;
      }
      let rows: ClaimedRow[];
      try {
        rows = await this.deps.service.jobs.claim({
          queue: this.queue,
          maxJobs: Math.min(free, CLAIM_MAX),
          leaseMs: this.leaseMs,
          workerId: this.workerId,
          waitMs: CLAIM_WAIT_MS,
          signal,
          log,
        });
      } catch (err) {
        if (signal.aborted) break;
        log.warn({ queue: this.queue, error: (err as Error).message }, 'push: a claim failed; trying again');
        await sleep(1000, signal);
        continue;
      }
      for (const row of rows) this.begin(row);
    }
  }

  /** Deliver `row` in the background, counted in flight until it is settled. */
  private begin(row: ClaimedRow): void {
    const delivery: Promise<void> = this.push(row)
      .catch((err) =>
        this.deps.log.warn(
          { queue: this.queue, job: row.id, error: (err as Error).message },
          'push: a delivery failed',
        ),
      )
      .finally(() => this.inFlight.delete(delivery));
    this.inFlight.add(delivery);
  }

  private get leaseMs(): number {
    return Math.min(LEASE_MS_MAX, Math.max(LEASE_MS_MIN, this.endpoint.timeout_ms + LEASE_MARGIN_MS));
  }

  /** Deliver one claimed job and settle it by the answer. */
  private async push(row: ClaimedRow): Promise<void> {
    const { metrics, allowList, maxAnswerBytes, tracing } = this.deps;
    const endpoint = this.endpoint;
    const url = new URL(endpoint.url);
    const labels = { queue: metrics.queue(row.queue) };
    // The delivery's span continues the job's trace, and the endpoint continues the span: the request
    // carries the span's context, not the job's.
    const span = tracing.enabled
      ? tracing.start(`push ${row.queue}`, {
          kind: 'client',
          parent: traceOf(row.meta),
          attributes: {
            ...messagingAttributes('push', 'process', row.queue),
            'messaging.message.id': row.id,
            'http.request.method': 'POST',
            'server.address': url.hostname,
            'baton.attempt': row.attempts,
          },
        })
      : undefined;
    const trace = span?.context;
    const target = await allowList.resolve(url);
    let answer: DeliveryAnswer;
    if ('refused' in target) {
      answer = { kind: 'failed', reason: 'connection', message: `refused: ${target.refused}`, ms: 0 };
    } else {
      answer = await deliver({
        url,
        ...target,
        headers: this.headersOf(row, endpoint, trace ?? traceOf(row.meta)),
        body: row.payload_json,
        timeoutMs: endpoint.timeout_ms,
        maxAnswerBytes,
        signal: this.abort.signal,
        agent: this.agents[url.protocol as 'http:' | 'https:'],
      });
    }
    if (span) {
      if (answer.kind === 'answer') {
        span.set({ 'http.response.status_code': answer.status });
        if (answer.status >= 400) span.fail(`the endpoint answered ${answer.status}`);
      } else span.fail(answer.message);
      span.end();
    }
    if (answer.kind === 'failed' && answer.reason === 'stopped') {
      // This replica is stopping: the job goes back at once, uncounted, for a replica that stays.
      metrics.pushDeliveries.inc({ ...labels, outcome: 'stopped' });
      await this.settle(
        row,
        {
          kind: 'nack',
          outcome: 'unreachable',
          message: 'push: the replica delivering it stopped',
          details: {},
          dead: false,
          throttle: false,
          giveBack: true,
        },
        trace,
      );
      return;
    }
    const action = actionOf(answer);
    metrics.pushDeliveries.inc({ ...labels, outcome: action.outcome });
    metrics.pushSeconds.observe(labels, answer.ms / 1000);
    if (action.kind === 'nack' && action.throttle) {
      this.window.throttled(action.pauseMs);
      metrics.pushThrottled.inc(labels);
    } else this.window.answered();
    metrics.pushWindow.set(labels, this.window.slots);
    await this.settle(row, action, trace);
  }

  /** Ack or nack a delivered job by its answer; its span is a child of the delivery's (`trace`). */
  private async settle(row: ClaimedRow, action: PushAction, trace: TraceContext | undefined): Promise<void> {
    const { leases } = this.deps.service;
    const item = { id: row.id, queue: row.queue, leaseToken: row.lease_token };
    if (action.kind === 'keep') return;
    if (action.kind === 'ack') {
      // As a pull worker's ack-and-claim: the next job comes with the ack, one statement for both,
      // while the window has room for it beside the deliveries still in flight (this one included).
      const room = this.window.slots - this.inFlight.size >= 0 && !this.abort.signal.aborted;
      const { next } = await leases.ack(
        { ...item, ...(action.resultJson === undefined ? {} : { resultJson: action.resultJson }) },
        room
          ? {
              maxJobs: 1,
              leaseMs: this.leaseMs,
              workerId: this.workerId,
              waitMs: 0,
              signal: this.abort.signal,
              log: this.deps.log,
            }
          : undefined,
        trace,
      );
      for (const row of next) this.begin(row);
      return;
    }
    if (action.giveBack) {
      await leases.nack({ ...item, giveBack: true }, undefined, trace);
      return;
    }
    await leases.nack(
      {
        ...item,
        error: { message: action.message, details: action.details },
        dead: action.dead,
      },
      undefined,
      trace,
    );
  }

  private headersOf(
    row: ClaimedRow,
    endpoint: PushEndpointRow,
    trace: TraceContext | undefined,
  ): Record<string, string> {
    const secrets = [endpoint.secret];
    if (
      endpoint.previous_secret &&
      endpoint.previous_until &&
      endpoint.previous_until.getTime() > Date.now()
    ) {
      secrets.push(endpoint.previous_secret);
    }
    return {
      'content-type': 'application/json',
      'user-agent': `Baton/${BATON_VERSION}`,
      'baton-job-id': row.id,
      'baton-queue': row.queue,
      'baton-attempt': String(row.attempts),
      'baton-max-attempts': String(row.max_attempts),
      'baton-lease-token': row.lease_token,
      'baton-lease-expires-at': row.lease_expires_at.toISOString(),
      ...(row.deadline_at ? { 'baton-deadline-at': row.deadline_at.toISOString() } : {}),
      ...(row.group_key ? { 'baton-group': row.group_key } : {}),
      ...(trace
        ? { traceparent: trace.traceparent, ...(trace.tracestate ? { tracestate: trace.tracestate } : {}) }
        : {}),
      [SIGNATURE_HEADER]: signatureHeader(secrets, Math.floor(Date.now() / 1000), row.payload_json),
    };
  }
}

function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal.aborted) return resolve();
    const t = setTimeout(done, ms);
    function done() {
      clearTimeout(t);
      signal.removeEventListener('abort', done);
      resolve();
    }
    signal.addEventListener('abort', done, { once: true });
  });
}
