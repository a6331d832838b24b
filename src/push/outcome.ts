import type { DeliveryAnswer } from './deliver.js';

/** What a delivery's answer does to its job (docs/push.md has the table). */
export type PushAction =
  | { kind: 'ack'; resultJson?: string; outcome: 'acked' }
  /** 202: the endpoint keeps the lease, and renews and acks through the API with its token. */
  | { kind: 'keep'; outcome: 'accepted' }
  | {
      kind: 'nack';
      outcome: 'failed' | 'dead' | 'throttled' | 'timeout' | 'unreachable';
      message: string;
      details: Record<string, unknown>;
      dead: boolean;
      /** Narrow this replica's window (window.ts). */
      throttle: boolean;
      /**
       * Give the job back instead of failing the attempt (a nack's give_back: ready again, the
       * attempt not counted, no error recorded): an endpoint asking for a pause has not failed the
       * job, and a long throttle must not use up its attempts.
       */
      giveBack?: boolean;
      /** Pause this replica's deliveries of the queue this long (the endpoint's Retry-After). */
      pauseMs?: number;
    };

/** A 429 or 503 without Retry-After pauses the replica's deliveries this long. */
const THROTTLE_PAUSE_MS = 1000;

/** The longest Retry-After honoured: an hour. */
const RETRY_AFTER_MAX_MS = 3_600_000;

/** Retry-After as seconds or an HTTP date; undefined when absent or unreadable. */
export function retryAfterMs(value: string | string[] | undefined, now = Date.now()): number | undefined {
  const v = Array.isArray(value) ? value[0] : value;
  if (v === undefined || v.trim() === '') return undefined;
  const ms = /^\d+$/.test(v.trim()) ? Number(v.trim()) * 1000 : Date.parse(v) - now;
  return Number.isFinite(ms) ? Math.min(RETRY_AFTER_MAX_MS, Math.max(0, ms)) : undefined;
}

/** The start of an answer's body, as text, for the job's error. */
const excerpt = (body: Buffer) => body.subarray(0, 500).toString('utf8');

/**
 * 2xx acks (a JSON body is the result); 202 keeps the lease with the endpoint; 410, or `Baton-Dead:
 * true` on a failure, sends the job to dead; 429 and 503 give the job back uncounted, narrow the
 * window and pause the replica for Retry-After; any other answer, a timeout or a connection that
 * failed nacks with the queue's backoff.
 */
export function actionOf(answer: DeliveryAnswer): PushAction {
  if (answer.kind === 'failed') {
    return {
      kind: 'nack',
      outcome: answer.reason === 'timeout' ? 'timeout' : 'unreachable',
      message: `push: ${answer.message}`,
      details: { push: { failure: answer.reason, ms: answer.ms } },
      dead: false,
      throttle: answer.reason === 'timeout',
    };
  }
  const { status, headers, body } = answer;
  if (status === 202) return { kind: 'keep', outcome: 'accepted' };
  if (status >= 200 && status < 300) {
    const json = /^application\/([a-z0-9.+-]+\+)?json\b/i.test(String(headers['content-type'] ?? ''));
    if (json && !answer.cut && body.length > 0) {
      const text = body.toString('utf8');
      try {
        JSON.parse(text);
        return { kind: 'ack', resultJson: text, outcome: 'acked' };
      } catch {
        // Not JSON after all: acked without a result.
      }
    }
    return { kind: 'ack', outcome: 'acked' };
  }
  const details = { push: { status, ms: answer.ms, body: excerpt(body) } };
  const message = `push: HTTP ${status}`;
  if (status === 429 || status === 503) {
    return {
      kind: 'nack',
      outcome: 'throttled',
      message,
      details,
      dead: false,
      throttle: true,
      giveBack: true,
      pauseMs: retryAfterMs(headers['retry-after']) ?? THROTTLE_PAUSE_MS,
    };
  }
  const dead = status === 410 || String(headers['baton-dead'] ?? '').toLowerCase() === 'true';
  return { kind: 'nack', outcome: dead ? 'dead' : 'failed', message, details, dead, throttle: false };
}
