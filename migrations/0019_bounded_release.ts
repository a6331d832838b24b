import { type Kysely, sql } from 'kysely';
import { createParentsRedriven, createReleaseFunctions } from './0016_job_dependencies.js';

/**
 * Releases in bounded steps, outside the finishing transaction (docs/adr/0004-bounded-release.md).
 *
 * Until now the AFTER INSERT trigger on baton.job_history released every child of a finished parent
 * inside the parent's finishing statement: an ack of a parent with a million children ran for
 * minutes in the shared ack group, and a re-arm of such a parent stopped the leader's re-arm for
 * every tenant. Now the trigger only writes one row per finished parent into `baton.parent_events`
 * (and tells every replica); `baton.release_step(batch)` then does at most `batch` of its children
 * per transaction (`baton.release_event` for one event, as many events as fit), called in a loop by
 * each replica's releaser (src/maintenance/releaser.ts).
 *
 * - **One event per parent at a time.** A step takes the oldest event of a parent (FOR UPDATE SKIP
 *   LOCKED on the event row), so two replicas never work on the same parent and a parent's events are
 *   applied in order (dead, then redriven, then completed). Events of different parents take turns
 *   (`turn`, rewritten after each step), so a huge fan-out does not hold back a small one behind it
 *   for more than one step.
 * - **A cursor per event** (`after`, the last child walked): the walk goes on by the edges' index
 *   (parent, child) from there, so the edges it already resolved are never walked again (without it,
 *   a million children would cost a million squared over two index entries). Safe: every edge whose
 *   parent_outcome is still NULL was committed before the parent's finish (the child's enqueue holds
 *   the parent's live row), so it exists when the event does.
 * - **Exactly once** as before: an edge is resolved once (`parent_outcome IS NULL`, under the event
 *   row's lock), and the child's counter moves under its row lock, so of two steps finishing its last
 *   two parents exactly one sees 0. A child whose only open parent completed is moved without writing
 *   its counter first (`baton.move_released(ids, 1)`, which re-checks `pending = 1` on the row it
 *   deletes), one row version fewer for the common fan-out.
 * - **Cascades are events too**: a child cancelled because its parent failed is filed with its own
 *   `dependents` flag, so the trigger writes its event, and its own children are reached by a later
 *   step, not by a loop inside this one. A redrive writes a `redriven` event (replacing the parent's
 *   pending failure event), and children brought back get theirs.
 */
export async function up(db: Kysely<any>): Promise<void> {
  await sql`
    CREATE TABLE baton.parent_events (
      seq bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
      parent bigint NOT NULL,
      kind text NOT NULL CHECK (kind IN ('completed', 'dead', 'cancelled', 'redriven')),
      after bigint NOT NULL DEFAULT 0,
      turn timestamptz NOT NULL DEFAULT clock_timestamp(),
      created_at timestamptz NOT NULL DEFAULT now()
    )`.execute(db);
  await sql`CREATE INDEX parent_events_parent_idx ON baton.parent_events (parent, seq)`.execute(db);
  await sql`CREATE INDEX parent_events_turn_idx ON baton.parent_events (turn, seq)`.execute(db);

  // The trigger keeps its name and its WHEN (NEW.dependents): a job without children pays nothing more.
  // One notice per transaction (NOTIFY folds equal payloads), 'p' telling every replica's releaser.
  await sql`
    CREATE OR REPLACE FUNCTION baton.job_finished() RETURNS trigger LANGUAGE plpgsql AS $fn$
    BEGIN
      INSERT INTO baton.parent_events (parent, kind) VALUES (NEW.id, NEW.state);
      PERFORM pg_notify('baton_jobs', '{"r":"postgres","q":{},"p":1}');
      RETURN NULL;
    END
    $fn$`.execute(db);
  await sql`DROP FUNCTION baton.parents_finished(bigint[], text)`.execute(db);

  // A redriven parent: its failure, if not yet applied in full, is forgotten, and what was applied is
  // undone by a 'redriven' event, in order behind any event of it still being worked on.
  await sql`
    CREATE OR REPLACE FUNCTION baton.parents_redriven(redriven bigint[]) RETURNS void
    LANGUAGE plpgsql AS $fn$
    BEGIN
      DELETE FROM baton.parent_events WHERE parent = ANY(redriven) AND kind <> 'redriven';
      INSERT INTO baton.parent_events (parent, kind) SELECT DISTINCT p, 'redriven' FROM unnest(redriven) p;
      PERFORM pg_notify('baton_jobs', '{"r":"postgres","q":{},"p":1}');
    END
    $fn$`.execute(db);

  // Children whose parents are all done: out of waiting, into the ring (or scheduled_jobs, if their
  // run_at is ahead), those whose counter is `at_pending` (1: moved without counting, 0: counted to 0
  // by this transaction); one notice wakes the claims waiting on any replica ('postgres' is no
  // replica's id). Answers the ids it moved.
  await sql`
    CREATE FUNCTION baton.move_released(ids bigint[], at_pending integer) RETURNS bigint[]
    LANGUAGE plpgsql AS $fn$
    DECLARE
      moved_ids bigint[];
      woken jsonb;
    BEGIN
      WITH moved AS (
        DELETE FROM baton.waiting_jobs w WHERE w.id = ANY(ids) AND w.pending = at_pending RETURNING w.*
      ), due AS (
        INSERT INTO baton.jobs (slot, id, queue, group_key, priority, max_attempts, idempotency_key, created_at,
                                payload, meta, timeout_ms, expires_at, unique_key, dependents, state, run_at,
                                attempts, last_error, errors)
        SELECT baton.job_slot(id), id, queue, group_key, priority, max_attempts, idempotency_key, created_at,
               payload, meta, timeout_ms, expires_at, unique_key, dependents, 'ready', run_at, 0, last_error, errors
        FROM moved WHERE run_at <= now()
        RETURNING id, queue
      ), later AS (
        INSERT INTO baton.scheduled_jobs (id, queue, group_key, priority, max_attempts, idempotency_key, created_at,
                                          payload, meta, timeout_ms, expires_at, unique_key, dependents, run_at,
                                          attempts, last_error, errors)
        SELECT id, queue, group_key, priority, max_attempts, idempotency_key, created_at,
               payload, meta, timeout_ms, expires_at, unique_key, dependents, run_at, 0, last_error, errors
        FROM moved WHERE run_at > now()
        RETURNING id
      )
      SELECT (SELECT jsonb_object_agg(queue, n) FROM (SELECT queue, count(*) AS n FROM due GROUP BY queue) x),
             ARRAY(SELECT id FROM due UNION ALL SELECT id FROM later)
      INTO woken, moved_ids;
      IF woken IS NOT NULL THEN
        PERFORM pg_notify('baton_jobs', jsonb_build_object('r', 'postgres', 'q', woken)::text);
      END IF;
      RETURN moved_ids;
    END
    $fn$`.execute(db);

  await sql`
    CREATE FUNCTION baton.release_event(ev baton.parent_events, batch integer) RETURNS jsonb
    LANGUAGE plpgsql AS $fn$
    DECLARE
      walked bigint[];
      single bigint[] := '{}';
      shared bigint[] := '{}';
      moved bigint[] := '{}';
      freed bigint[] := '{}';
      released integer := 0;
      doomed bigint[] := '{}';
      back bigint[] := '{}';
      cancelled bigint[] := '{}';
    BEGIN
      SELECT coalesce(array_agg(w.child ORDER BY w.child), '{}') INTO walked FROM (
        SELECT e.child FROM baton.job_edges e
        WHERE e.parent = ev.parent AND e.child > ev.after
        ORDER BY e.child LIMIT batch
      ) w;

      IF ev.kind = 'redriven' THEN
        -- Children still waiting that counted this parent as failed (policy 'run'): pending again.
        WITH reopened AS (
          UPDATE baton.job_edges e SET parent_outcome = NULL
          FROM baton.waiting_jobs w
          WHERE e.parent = ev.parent AND e.child = ANY(walked) AND e.parent_outcome IN ('dead', 'cancelled')
            AND w.id = e.child
          RETURNING e.child
        )
        UPDATE baton.waiting_jobs w SET pending = w.pending + 1, parents_failed = w.parents_failed - 1
        FROM reopened r WHERE w.id = r.child;

        -- Children this parent's failure cancelled, and that no other failed parent holds back.
        SELECT coalesce(array_agg(DISTINCT h.id), '{}') INTO back
        FROM baton.job_edges e
        JOIN baton.job_history h ON h.id = e.child AND h.state = 'cancelled'
                                 AND h.last_error->>'reason' = 'parent_failed'
        WHERE e.parent = ev.parent AND e.child = ANY(walked) AND e.parent_outcome IN ('dead', 'cancelled')
          AND NOT EXISTS (SELECT 1 FROM baton.job_edges o
                          WHERE o.child = e.child AND o.parent <> ev.parent
                            AND o.parent_outcome IN ('dead', 'cancelled'));
        IF cardinality(back) > 0 THEN
          UPDATE baton.job_edges e SET parent_outcome = NULL WHERE e.child = ANY(back) AND e.parent = ev.parent;
          -- A child coming back is no longer cancelled: what its cancellation did to its own children,
          -- if not yet done, is not done; what was done is undone by its own 'redriven' event.
          DELETE FROM baton.parent_events WHERE parent = ANY(back) AND kind <> 'redriven';
          WITH moved AS (
            DELETE FROM baton.job_history h WHERE h.id = ANY(back) AND h.state = 'cancelled' RETURNING h.*
          ), restored AS (
            INSERT INTO baton.waiting_jobs (id, queue, group_key, priority, run_at, attempts, max_attempts,
                                            idempotency_key, created_at, last_error, errors, payload, meta,
                                            timeout_ms, expires_at, unique_key, dependents, pending,
                                            parents_failed, on_parent_failure)
            SELECT m.id, m.queue, m.group_key, m.priority, m.run_at, 0, m.max_attempts, m.idempotency_key,
                   m.created_at, NULL, m.errors, m.payload, m.meta, m.timeout_ms, m.expires_at, m.unique_key,
                   EXISTS (SELECT 1 FROM baton.job_edges d WHERE d.parent = m.id),
                   (SELECT count(*) FROM baton.job_edges p WHERE p.child = m.id AND p.parent_outcome IS NULL),
                   0,
                   (SELECT p.on_parent_failure FROM baton.job_edges p WHERE p.child = m.id LIMIT 1)
            FROM moved m
            RETURNING id, dependents
          )
          INSERT INTO baton.parent_events (parent, kind) SELECT id, 'redriven' FROM restored WHERE dependents;
        END IF;
      ELSE
        -- Resolve this slice of the parent's open edges. A child whose last open parent this is (by
        -- this statement's snapshot), when the parent completed, is moved at once without writing its
        -- counter first (one row version fewer: the common fan-out); the others' counters move under
        -- their row locks (READ COMMITTED re-reads a row it waited for), so of two steps finishing a
        -- child's last two parents at once, exactly one sees 0.
        WITH resolved AS (
          UPDATE baton.job_edges e SET parent_outcome = ev.kind
          WHERE e.parent = ev.parent AND e.child = ANY(walked) AND e.parent_outcome IS NULL
          RETURNING e.child
        )
        SELECT coalesce(array_agg(r.child) FILTER (WHERE ev.kind = 'completed' AND w.pending = 1), '{}'),
               coalesce(array_agg(r.child) FILTER (WHERE NOT (ev.kind = 'completed' AND w.pending = 1)), '{}')
        INTO single, shared
        FROM resolved r JOIN baton.waiting_jobs w ON w.id = r.child;

        IF cardinality(single) > 0 THEN
          moved := baton.move_released(single, 1);
          -- One whose counter moved meanwhile (a redriven parent reopened an edge) is counted below.
          shared := shared || ARRAY(SELECT unnest(single) EXCEPT SELECT unnest(moved));
          released := cardinality(moved);
        END IF;

        WITH counted AS (
          UPDATE baton.waiting_jobs w
          SET pending = w.pending - 1,
              parents_failed = w.parents_failed + CASE WHEN ev.kind = 'completed' THEN 0 ELSE 1 END
          FROM unnest(shared) AS r(child) WHERE w.id = r.child
          RETURNING w.id, w.pending, w.parents_failed, w.on_parent_failure
        )
        SELECT coalesce(array_agg(id) FILTER (WHERE on_parent_failure = 'cancel' AND parents_failed > 0), '{}'),
               coalesce(array_agg(id) FILTER (WHERE pending = 0 AND NOT (on_parent_failure = 'cancel' AND parents_failed > 0)), '{}')
        INTO doomed, freed FROM counted;
        IF cardinality(freed) > 0 THEN
          released := released + cardinality(baton.move_released(freed, 0));
        END IF;

        -- A failed parent and the policy 'cancel': the child is cancelled now (its other parents are
        -- not waited for). Filed with its own flag, so its children get an event of their own.
        IF cardinality(doomed) > 0 THEN
          WITH gone AS (
            DELETE FROM baton.waiting_jobs w WHERE w.id = ANY(doomed) RETURNING w.*
          ), filed AS (
            INSERT INTO baton.job_history (id, queue, group_key, state, priority, run_at, attempts, max_attempts,
                                           worker_id, idempotency_key, dead_reason, created_at, claimed_at, finished_at,
                                           last_error, errors, result, payload, ack_token, meta, timeout_ms, expires_at,
                                           unique_key, dependents)
            SELECT id, queue, group_key, 'cancelled', priority, run_at, attempts, max_attempts, worker_id,
                   idempotency_key, NULL, created_at, claimed_at, now(),
                   jsonb_build_object('reason', 'parent_failed', 'attempt', 0,
                                      'at', to_char(now() AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'),
                                      'message', 'a parent failed and the policy is to cancel'),
                   errors, NULL, payload, NULL, meta, timeout_ms, expires_at, unique_key, dependents
            FROM gone
            RETURNING id
          )
          SELECT coalesce(array_agg(id), '{}') INTO cancelled FROM filed;
        END IF;
      END IF;

      IF cardinality(walked) < batch THEN
        DELETE FROM baton.parent_events WHERE seq = ev.seq;
      ELSE
        UPDATE baton.parent_events SET after = walked[cardinality(walked)], turn = clock_timestamp()
        WHERE seq = ev.seq;
      END IF;

      RETURN jsonb_build_object(
        'walked', cardinality(walked),
        'released', released,
        'cancelled', to_jsonb(cancelled::text[]),
        'restored', cardinality(back),
        'more', cardinality(walked) >= batch);
    END
    $fn$`.execute(db);

  // One step, one transaction: events in turn until `batch` children have been walked, so a
  // thousand parents of one child each (a fan-in) cost one transaction, not a thousand, and a parent
  // of a million children costs a thousand. An event is applied at most once per step (applied in
  // full it is deleted, in part the step ends), and one filed by this step (a cascade) may follow.
  await sql`
    CREATE FUNCTION baton.release_step(batch integer) RETURNS jsonb
    LANGUAGE plpgsql AS $fn$
    DECLARE
      ev baton.parent_events%ROWTYPE;
      one jsonb;
      budget integer := batch;
      events integer := 0;
      walked integer := 0;
      released integer := 0;
      restored integer := 0;
      cancelled jsonb := '[]';
      more boolean := false;
    BEGIN
      WHILE budget > 0 LOOP
        -- The oldest event of its parent (an older one, maybe locked by another replica, goes
        -- first), the one whose turn is oldest.
        SELECT e.* INTO ev FROM baton.parent_events e
        WHERE NOT EXISTS (SELECT 1 FROM baton.parent_events o WHERE o.parent = e.parent AND o.seq < e.seq)
        ORDER BY e.turn, e.seq
        LIMIT 1
        FOR UPDATE SKIP LOCKED;
        EXIT WHEN NOT FOUND;
        one := baton.release_event(ev, budget);
        events := events + 1;
        walked := walked + (one->>'walked')::integer;
        released := released + (one->>'released')::integer;
        restored := restored + (one->>'restored')::integer;
        cancelled := cancelled || (one->'cancelled');
        IF (one->>'more')::boolean THEN
          more := true;
          EXIT;
        END IF;
        budget := budget - greatest((one->>'walked')::integer, 1);
      END LOOP;
      IF events = 0 THEN
        RETURN NULL;
      END IF;
      RETURN jsonb_build_object('events', events, 'walked', walked, 'released', released,
                                'cancelled', cancelled, 'restored', restored, 'more', more);
    END
    $fn$`.execute(db);
}

/**
 * Back to the release inside the finishing transaction: the pending events are applied first (so no
 * child waits for a release that would never come), then migration 0016's functions come back.
 */
export async function down(db: Kysely<any>): Promise<void> {
  await sql`
    DO $do$
    BEGIN
      WHILE baton.release_step(1000) IS NOT NULL LOOP
      END LOOP;
    END
    $do$`.execute(db);
  await createReleaseFunctions(db);
  await createParentsRedriven(db);
  await sql`DROP FUNCTION baton.release_step(integer)`.execute(db);
  await sql`DROP FUNCTION baton.release_event(baton.parent_events, integer)`.execute(db);
  await sql`DROP FUNCTION baton.move_released(bigint[], integer)`.execute(db);
  await sql`DROP TABLE baton.parent_events`.execute(db);
}
