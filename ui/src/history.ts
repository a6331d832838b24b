import { must, type QueueHistory } from './api.js';
import { HISTORY_REFRESH_MS } from './config.js';
import { usePoll } from './hooks.js';
import { useSession } from './session.js';

/**
 * A queue's history (GET /v1/queues/{queue}/history) as one value per minute, ready to chart. A
 * past minute without a sample was idle (the server writes none then), so it reads as zero. The
 * current minute may not be sampled yet (the leader samples early in each minute): without a
 * sample it is a gap, as is an unknown arrival count (null).
 */
type Series = (number | null)[];
export interface Minutes {
  /** Unix seconds of each minute, oldest first, ending with the current one. */
  at: number[];
  enqueued: Series;
  completed: Series;
  dead: Series;
  /** Attempts that failed (retried or not); a sample from before they were counted reads its dead jobs. */
  attemptsFailed: Series;
  ready: Series;
  /** Queue lag: age of the oldest ready job, in seconds. */
  lagSeconds: Series;
  /** dead / (completed + dead); null in a minute where nothing finished. */
  failureRate: Series;
}

/**
 * Each minute of the last `minutes`, oldest first, ending with the current one: its unix second, its
 * sample if any, and whether it is the current minute without a sample yet (a gap to draw, where a
 * past minute without one was idle: zero). For a queue's history and for the overview's minutes.
 */
export function eachMinute<S extends { minute: string }>(
  nowIso: string,
  minutes: number,
  samples: readonly S[],
): { at: number; sample: S | undefined; pending: boolean }[] {
  const last = Math.floor(Date.parse(nowIso) / 60_000) * 60;
  const bySecond = new Map(samples.map((s) => [Date.parse(s.minute) / 1000, s]));
  const out: { at: number; sample: S | undefined; pending: boolean }[] = [];
  for (let t = last - (minutes - 1) * 60; t <= last; t += 60) {
    const sample = bySecond.get(t);
    out.push({ at: t, sample, pending: !sample && t === last });
  }
  return out;
}

export function perMinute(history: QueueHistory, minutes: number): Minutes {
  const out: Minutes = {
    at: [],
    enqueued: [],
    completed: [],
    dead: [],
    attemptsFailed: [],
    ready: [],
    lagSeconds: [],
    failureRate: [],
  };
  for (const { at, sample: s, pending } of eachMinute(history.now, minutes, history.samples)) {
    out.at.push(at);
    if (pending) {
      for (const series of [
        out.enqueued,
        out.completed,
        out.dead,
        out.attemptsFailed,
        out.ready,
        out.lagSeconds,
        out.failureRate,
      ])
        series.push(null);
      continue;
    }
    out.enqueued.push(s ? s.enqueued : 0);
    out.completed.push(s?.completed ?? 0);
    out.dead.push(s?.dead ?? 0);
    out.attemptsFailed.push(s ? (s.attempts_failed ?? s.dead) : 0);
    out.ready.push(s?.ready ?? 0);
    out.lagSeconds.push((s?.oldest_ready_age_ms ?? 0) / 1000);
    const finished = (s?.completed ?? 0) + (s?.dead ?? 0);
    out.failureRate.push(finished === 0 ? null : (s?.dead ?? 0) / finished);
  }
  return out;
}

export const sum = (values: (number | null)[]): number => values.reduce<number>((a, v) => a + (v ?? 0), 0);
export const max = (values: (number | null)[]): number =>
  values.reduce<number>((a, v) => Math.max(a, v ?? 0), 0);

/** A queue's last hour (GET /v1/queues/{queue}/history), re-read once a minute. */
export function useQueueHistory(queue: string) {
  const { api } = useSession();
  return usePoll(
    (signal) =>
      must(
        api.GET('/v1/queues/{queue}/history', {
          params: { path: { queue }, query: { minutes: 60 } },
          signal,
        }),
      ),
    HISTORY_REFRESH_MS,
    [api, queue],
  );
}
