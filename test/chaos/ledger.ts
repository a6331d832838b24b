/**
 * What chaos workers write down, one JSON line per event, appended synchronously so a SIGKILLed
 * worker loses at most the line it was writing. Times named `server_*` are the server's clock
 * (taken from its answers); `at` is the worker's.
 */
export type LedgerEntry =
  | {
      t: 'claim';
      job: string;
      attempt: number;
      token: string;
      server_claimed_at: number;
      server_expires_at: number;
      at: number;
    }
  | { t: 'start'; job: string; token: string; at: number }
  | { t: 'end'; job: string; token: string; at: number }
  | { t: 'renew'; job: string; token: string; status: number; server_expires_at?: number; at: number }
  | { t: 'ack'; job: string; token: string; status: number; at: number }
  | { t: 'nack'; job: string; token: string; status: number; server_at?: number; state?: string; at: number }
  | { t: 'http5xx'; status: number; path: string; at: number };

export interface FinalJob {
  id: string;
  state: string;
  attempts: number;
  kind: 'normal' | 'poison';
  /** The job's error history from the database: one entry per failed attempt, with the server's time. */
  errors: { attempt: number; at: string; message: string }[];
  /** When it finished, by the server's clock (ms); null while live. */
  finished_ms: number | null;
}

export interface Violations {
  missing: string[];
  live: string[];
  wrongState: string[];
  doubleAck: string[];
  staleTokenAck: string[];
  overlappingLeases: string[];
  runsBeyondAttempts: string[];
  /** A job with parents claimed before every parent had completed (or with a parent not completed). */
  childBeforeParent: string[];
  serverErrors: number[];
}

export function noViolations(): Violations {
  return {
    missing: [],
    live: [],
    wrongState: [],
    doubleAck: [],
    staleTokenAck: [],
    overlappingLeases: [],
    runsBeyondAttempts: [],
    childBeforeParent: [],
    serverErrors: [],
  };
}

/**
 * Check the invariants of at-least-once delivery over the whole run:
 * every job finished as it should; no job acked twice; every accepted ack carried the job's current
 * token (the token of its latest claim); no two leases on a job overlapped by the server's clock;
 * handler runs per job never exceed its attempts; no 5xx but 503; a job with parents (`parentsOf`) is
 * first claimed, by the server's clock, after its last parent completed.
 */
export function checkLedger(
  entries: LedgerEntry[],
  enqueued: Map<string, 'normal' | 'poison'>,
  finals: FinalJob[],
  parentsOf: ReadonlyMap<string, string[]> = new Map(),
): Violations {
  const v = noViolations();
  const byId = new Map(finals.map((f) => [f.id, f]));
  for (const [id, kind] of enqueued) {
    const final = byId.get(id);
    if (!final) v.missing.push(id);
    else if (['waiting', 'scheduled', 'ready', 'claimed'].includes(final.state)) v.live.push(id);
    else if (final.state !== (kind === 'poison' ? 'dead' : 'completed'))
      v.wrongState.push(`${id}:${final.state}`);
  }

  const perJob = new Map<string, LedgerEntry[]>();
  for (const e of entries) {
    if (e.t === 'http5xx') {
      if (e.status !== 503) v.serverErrors.push(e.status);
      continue;
    }
    const list = perJob.get(e.job) ?? [];
    list.push(e);
    perJob.set(e.job, list);
  }

  for (const [job, list] of perJob) {
    const claims = list
      .filter((e): e is Extract<LedgerEntry, { t: 'claim' }> => e.t === 'claim')
      .sort((a, b) => a.server_claimed_at - b.server_claimed_at);
    const acks = list.filter((e) => e.t === 'ack' && e.status === 200) as Extract<
      LedgerEntry,
      { t: 'ack' }
    >[];
    // A repeated ack of the same lease (a retry after a lost answer) is the same ack.
    if (new Set(acks.map((a) => a.token)).size > 1) v.doubleAck.push(job);
    const latest = claims.at(-1);
    for (const ack of acks) if (!latest || ack.token !== latest.token) v.staleTokenAck.push(job);

    // Each lease runs from its claim to its last accepted renewal's expiry, or ends early when the
    // worker's nack was accepted. The next claim must come after that. Nacks are read from the job's
    // error history in the database too, because a worker whose nack committed but whose answer was
    // lost (the replica died) retries, gets 409, and never learns that the first one took.
    const final = byId.get(job);
    const nackedAt = new Map(
      (final?.errors ?? [])
        .filter((e) => e.message !== 'lease expired')
        .map((e) => [e.attempt, Date.parse(e.at)]),
    );
    for (let i = 1; i < claims.length; i++) {
      const prev = claims[i - 1]!;
      const next = claims[i]!;
      const ofPrev = list.filter((e) => 'token' in e && e.token === prev.token);
      const nacked = ofPrev.find((e) => e.t === 'nack' && e.status === 200) as
        | Extract<LedgerEntry, { t: 'nack' }>
        | undefined;
      let end = prev.server_expires_at;
      for (const e of ofPrev)
        if (e.t === 'renew' && e.status === 200 && e.server_expires_at)
          end = Math.max(end, e.server_expires_at);
      if (nacked?.server_at !== undefined) end = Math.min(end, nacked.server_at);
      const recorded = nackedAt.get(prev.attempt);
      if (recorded !== undefined) end = Math.min(end, recorded);
      if (next.server_claimed_at < end)
        v.overlappingLeases.push(`${job}: claim at ${next.server_claimed_at} < previous lease end ${end}`);
    }

    const runs = list.filter((e) => e.t === 'start').length;
    if (final && runs > final.attempts)
      v.runsBeyondAttempts.push(`${job}: ${runs} runs, ${final.attempts} attempts`);
  }
  for (const [child, parents] of parentsOf) {
    const firstClaim = Math.min(
      ...entries.flatMap((e) => (e.t === 'claim' && e.job === child ? [e.server_claimed_at] : [])),
    );
    if (!Number.isFinite(firstClaim)) continue;
    for (const parent of parents) {
      const p = byId.get(parent);
      // Claim times come to the millisecond, history's to the microsecond: compare whole milliseconds.
      if (p?.state !== 'completed' || p.finished_ms === null || firstClaim < Math.floor(p.finished_ms)) {
        v.childBeforeParent.push(
          `${child}: claimed at ${firstClaim}, parent ${parent} ${p?.state} at ${p?.finished_ms}`,
        );
      }
    }
  }
  return v;
}

export function violationCount(v: Violations): number {
  return Object.values(v).reduce((n, list) => n + list.length, 0);
}
