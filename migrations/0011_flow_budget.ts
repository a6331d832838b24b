import { type Kysely, sql } from 'kysely';

/**
 * Flow control's reads, as functions, so that a limited claim is one statement
 * (docs/adr/0008-claim-statements.md; docs/benchmarks.md, row "Limited claim in one statement").
 *
 * A claim of a limited queue must read what its limits depend on (claimed jobs, rate windows) AFTER
 * it holds the queue's flow lock, or it could miss the claims of the holder before it. A statement's
 * snapshot is taken when it starts, so a lock taken inside it comes too late for its own reads; that
 * is why the claim used to be a transaction of six round trips (BEGIN, lock, read, claim, record,
 * COMMIT). A VOLATILE function, though, takes a fresh snapshot for each query it runs: flow_budget
 * takes the lock and then reads, so the claim statement can call it first and pick no more than it
 * allows. The claim's own pick still starts from the older snapshot, which is safe: FOR UPDATE SKIP
 * LOCKED re-checks each row's latest version and skips those claimed (or deleted) meanwhile.
 *
 * - rate_room / rate_recorded: the sliding window of a rate limit, kept in baton.flow_state as two
 *   parallel arrays: the start of each bucket that saw claims, and how many jobs were claimed in it.
 *   A bucket is a hundredth of the period. A log of every claim would be exact but grow with the
 *   limit (100,000 an hour: an array of 100,000 times, rewritten by every claim); with buckets the
 *   window is at most ~101 entries. The price: a bucket counts until its END has left the window,
 *   so a claim is let through at most one bucket (1% of the period) later than a perfect log would;
 *   never more than `lim` in any window, sometimes slightly fewer. Times are whole milliseconds.
 * - flow_budget: lock, then how many jobs a claim of `wanted` may take under the queue's own limits
 *   and, when no ready job has a group, under the group defaults of the no-group group; or that the
 *   claim must walk the groups (src/jobs/claim/flow.ts). Also what the walk and the record of the claim need.
 *
 * The lock is (0x62617466, hashtext(queue)), transaction-level: it is held until the claim commits,
 * and released after its rows are visible, so the next claim of the queue counts them.
 */
export async function up(db: Kysely<any>): Promise<void> {
  // Loops over the arrays comparing timestamps: on a full window of 100 buckets, set-based queries
  // (SPI calls) or extract() per bucket cost several times as much.
  await sql`
    CREATE FUNCTION baton.rate_room(times timestamptz[], counts integer[], lim integer, period_ms integer,
                                    at_ts timestamptz, OUT room integer, OUT retry_after_ms integer)
    LANGUAGE plpgsql IMMUTABLE AS $$
    DECLARE
      width integer := greatest(1, period_ms / 100);
      now_ms timestamptz := date_trunc('milliseconds', at_ts);
      -- A bucket is in the window while its end is after now - period.
      cutoff timestamptz := now_ms - (period_ms + width) * interval '1 millisecond';
      used bigint := 0;
      freed bigint := 0;
      t timestamptz;
      i integer := 0;
    BEGIN
      -- No limit: room NULL.
      IF lim IS NULL THEN RETURN; END IF;
      FOREACH t IN ARRAY coalesce(times, '{}') LOOP
        i := i + 1;
        IF t > cutoff THEN used := used + coalesce(counts[i], 0); END IF;
      END LOOP;
      IF used < lim THEN
        room := lim - used;
        RETURN;
      END IF;
      -- Full: in how many ms the oldest buckets will have left the window so that one more fits.
      room := 0;
      i := 0;
      FOREACH t IN ARRAY times LOOP
        i := i + 1;
        CONTINUE WHEN t <= cutoff;
        freed := freed + coalesce(counts[i], 0);
        IF used - freed < lim THEN
          retry_after_ms := greatest(1, round(extract(epoch FROM t - cutoff) * 1000)::integer);
          RETURN;
        END IF;
      END LOOP;
      retry_after_ms := period_ms;
    END $$`.execute(db);

  await sql`
    CREATE FUNCTION baton.rate_recorded(times timestamptz[], counts integer[], period_ms integer, at_ts timestamptz,
                                        n integer, OUT new_times timestamptz[], OUT new_counts integer[])
    LANGUAGE plpgsql IMMUTABLE AS $$
    DECLARE
      width integer := greatest(1, period_ms / 100);
      at_ms timestamptz := date_trunc('milliseconds', at_ts);
      cutoff timestamptz := at_ms - (period_ms + width) * interval '1 millisecond';
      bucket timestamptz;
      t timestamptz;
      i integer := 0;
      k integer;
    BEGIN
      new_times := '{}';
      new_counts := '{}';
      -- No rate limit: an empty window.
      IF period_ms IS NULL THEN RETURN; END IF;
      -- Keep the buckets still in the window at at_ts.
      FOREACH t IN ARRAY coalesce(times, '{}') LOOP
        i := i + 1;
        IF t > cutoff THEN
          new_times := new_times || t;
          new_counts := new_counts || coalesce(counts[i], 0);
        END IF;
      END LOOP;
      IF coalesce(n, 0) <= 0 THEN RETURN; END IF;
      -- Buckets are aligned on the epoch: the one of at_ts starts at a whole multiple of the width.
      bucket := timestamptz 'epoch'
        + (floor(extract(epoch FROM at_ms) * 1000 / width) * width) * interval '1 millisecond';
      k := cardinality(new_times);
      -- Into the last bucket when it is this one (or, should a clock ever run back, a later one).
      IF k > 0 AND new_times[k] >= bucket THEN
        new_counts[k] := new_counts[k] + n;
      ELSE
        new_times := new_times || bucket;
        new_counts := new_counts || n;
      END IF;
    END $$`.execute(db);

  // plan_cache_mode: the counts' LIMITs are parameters here, and with them the plan cache priced a
  // generic plan above a custom one and re-planned each count on every call (see src/jobs/claim/statement.ts, batchLimit).
  await sql`
    CREATE FUNCTION baton.flow_budget(
      p_queue text, p_wanted integer,
      OUT flow_controlled boolean, OUT limited boolean, OUT overrides boolean, OUT walk boolean,
      OUT blank_only boolean, OUT n integer, OUT reason text, OUT retry_after_ms integer, OUT read_at timestamptz,
      OUT in_flight integer, OUT concurrency_limit integer, OUT last_group text,
      OUT group_concurrency_limit integer, OUT group_rate_limit integer, OUT group_rate_period_ms integer,
      OUT rate_period_ms integer, OUT claim_times timestamptz[], OUT claim_counts integer[],
      OUT blank_rate_period_ms integer, OUT blank_claim_times timestamptz[], OUT blank_claim_counts integer[])
    LANGUAGE plpgsql VOLATILE
    SET plan_cache_mode = force_generic_plan
    AS $$
    DECLARE
      q baton.queues%ROWTYPE;
      rate record;
      blank_in_flight integer;
      room integer;
    BEGIN
      PERFORM pg_advisory_xact_lock(1650553958, hashtext(p_queue));
      -- Everything below is read after the lock, each query with a fresh snapshot.
      read_at := clock_timestamp();
      n := 0;
      flow_controlled := false;
      limited := false;
      overrides := false;
      walk := false;
      blank_only := false;
      in_flight := 0;
      SELECT * INTO q FROM baton.queues WHERE name = p_queue;
      IF NOT FOUND THEN RETURN; END IF;
      limited := q.concurrency_limit IS NOT NULL OR q.rate_limit IS NOT NULL
                 OR q.group_concurrency_limit IS NOT NULL OR q.group_rate_limit IS NOT NULL;
      flow_controlled := limited OR q.grouped;
      -- Group limits apply to the groups of whatever jobs there are, even before the queue is marked
      -- grouped; jobs without a group then form the no-group group, under the queue's group defaults.
      blank_only := q.grouped OR q.group_concurrency_limit IS NOT NULL OR q.group_rate_limit IS NOT NULL;
      IF NOT limited AND q.grouped THEN
        overrides := EXISTS (SELECT 1 FROM baton.queue_groups o WHERE o.queue = p_queue);
      END IF;
      concurrency_limit := q.concurrency_limit;
      rate_period_ms := q.rate_period_ms;
      group_concurrency_limit := q.group_concurrency_limit;
      group_rate_limit := q.group_rate_limit;
      group_rate_period_ms := q.group_rate_period_ms;
      SELECT fs.last_group, fs.claim_times, fs.claim_counts INTO last_group, claim_times, claim_counts
      FROM baton.flow_state fs WHERE fs.queue = p_queue AND fs.is_queue AND fs.group_key = '';
      IF q.paused THEN RETURN; END IF;

      n := p_wanted;
      IF q.concurrency_limit IS NOT NULL THEN
        -- Counted on jobs_claimed_idx, up to the limit.
        SELECT count(*) INTO in_flight FROM (
          SELECT 1 FROM baton.jobs c WHERE c.queue = p_queue AND c.state = 'claimed' LIMIT q.concurrency_limit) x;
        room := greatest(0, q.concurrency_limit - in_flight);
        IF room < n THEN n := room; reason := 'concurrency'; END IF;
      END IF;
      IF q.rate_limit IS NOT NULL THEN
        SELECT * INTO rate FROM baton.rate_room(claim_times, claim_counts, q.rate_limit, q.rate_period_ms, read_at);
        IF rate.room < n THEN n := rate.room; reason := 'rate'; retry_after_ms := rate.retry_after_ms; END IF;
      END IF;
      IF n = 0 OR NOT blank_only THEN RETURN; END IF;

      -- A ready job with a group: the groups are served in turn, which flow-claim.ts's walk does.
      walk := EXISTS (SELECT 1 FROM baton.jobs g WHERE g.queue = p_queue AND g.state = 'ready' AND g.group_key > '');
      IF walk THEN RETURN; END IF;

      -- Only the no-group group (which no override can name) has ready jobs. Its claimed jobs are no
      -- more than the queue's: when the queue's count is exact (under its own limit), a group limit of at
      -- least that count plus this claim cannot bind, and the count is skipped.
      IF q.group_concurrency_limit IS NOT NULL
         AND NOT coalesce(in_flight < q.concurrency_limit AND q.group_concurrency_limit >= in_flight + p_wanted, false) THEN
        SELECT count(*) INTO blank_in_flight FROM (
          SELECT 1 FROM baton.jobs c WHERE c.queue = p_queue AND c.group_key = '' AND c.state = 'claimed'
          LIMIT q.group_concurrency_limit) x;
        room := greatest(0, q.group_concurrency_limit - blank_in_flight);
        IF room < n THEN n := room; reason := 'group_concurrency'; retry_after_ms := NULL; END IF;
      END IF;
      IF q.group_rate_limit IS NOT NULL THEN
        blank_rate_period_ms := q.group_rate_period_ms;
        SELECT fs.claim_times, fs.claim_counts INTO blank_claim_times, blank_claim_counts
        FROM baton.flow_state fs WHERE fs.queue = p_queue AND NOT fs.is_queue AND fs.group_key = '';
        SELECT * INTO rate
        FROM baton.rate_room(blank_claim_times, blank_claim_counts, q.group_rate_limit, q.group_rate_period_ms, read_at);
        IF rate.room < n THEN
          n := rate.room;
          reason := 'group_rate';
          retry_after_ms := rate.retry_after_ms;
        END IF;
      END IF;
    END $$`.execute(db);
}

export async function down(db: Kysely<any>): Promise<void> {
  await sql`DROP FUNCTION IF EXISTS baton.flow_budget(text, integer)`.execute(db);
  await sql`DROP FUNCTION IF EXISTS baton.rate_recorded(timestamptz[], integer[], integer, timestamptz, integer)`.execute(
    db,
  );
  await sql`DROP FUNCTION IF EXISTS baton.rate_room(timestamptz[], integer[], integer, integer, timestamptz)`.execute(
    db,
  );
}
