import { type Kysely, sql } from 'kysely';

/**
 * Job dependencies (docs/adr/0002-job-dependencies.md).
 *
 * - `baton.waiting_jobs`: jobs that wait for parents, off the ring (so never in the claim index nor in
 *   a slot the ring must empty), each with a row-locked counter of parents not yet finished (`pending`),
 *   how many of them failed (`parents_failed`), and its policy for a failed parent.
 * - `baton.job_edges (child, parent)`: one row per dependency, kept after the child leaves waiting (the
 *   parents' results, a job page's graph), with the parent's outcome once it has one. Indexed by parent
 *   for the release, by child (the primary key) for `GET /v1/jobs/{id}/parents`.
 * - `dependents` on every job table: the job has children. Set on the parent's own row by the child's
 *   enqueue (an UPDATE, so the row lock orders it against the parent's finish: a finishing DELETE that
 *   waited for it re-reads the row and returns the flag), carried by every move. Only a finished row
 *   with the flag calls the release: a job without children pays one boolean in the history insert.
 * - `baton.parents_finished(ids, outcome)`, called by the AFTER INSERT trigger on baton.job_history
 *   `WHEN (NEW.dependents)`, in the finishing transaction, whatever finished the parent (ack, nack to
 *   dead, re-arm to dead, cancel, purge, expiry, superseded): resolves the parent's open edges, moves
 *   each waiting child's counter under its row lock (whichever transaction takes it to 0 promotes it,
 *   once), promotes the children it freed into the ring (or scheduled_jobs, if their run_at is ahead),
 *   and cancels those whose policy is `cancel` when the parent failed; cancellations cascade to their
 *   own children, iteratively (a chain of any depth, no recursion).
 * - `baton.parents_redriven(ids)`: a redriven parent takes its failed edges back; its still-waiting
 *   children count it as pending again and children it had cancelled come back to waiting, cascading.
 */
export async function up(db: Kysely<any>): Promise<void> {
  for (const table of ['baton.jobs', 'baton.scheduled_jobs', 'baton.job_history']) {
    await sql`ALTER TABLE ${sql.table(table)} ADD COLUMN dependents boolean NOT NULL DEFAULT false`.execute(
      db,
    );
  }
  await sql`
    CREATE TABLE baton.waiting_jobs (
      LIKE baton.scheduled_jobs INCLUDING DEFAULTS INCLUDING CONSTRAINTS,
      pending integer NOT NULL,
      parents_failed integer NOT NULL DEFAULT 0,
      on_parent_failure text NOT NULL,
      PRIMARY KEY (id),
      CONSTRAINT waiting_jobs_pending CHECK (pending >= 0 AND parents_failed >= 0),
      CONSTRAINT waiting_jobs_policy CHECK (on_parent_failure IN ('cancel', 'run'))
    ) WITH (fillfactor = 80)`.execute(db);
  await sql`CREATE INDEX waiting_jobs_queue_idx ON baton.waiting_jobs (queue, id)`.execute(db);
  await sql`
    CREATE TABLE baton.job_edges (
      child bigint NOT NULL,
      parent bigint NOT NULL,
      child_queue text NOT NULL,
      parent_queue text NOT NULL,
      on_parent_failure text NOT NULL CHECK (on_parent_failure IN ('cancel', 'run')),
      parent_outcome text CHECK (parent_outcome IN ('completed', 'dead', 'cancelled')),
      created_at timestamptz NOT NULL DEFAULT now(),
      PRIMARY KEY (child, parent)
    )`.execute(db);
  await sql`CREATE INDEX job_edges_parent_idx ON baton.job_edges (parent, child)`.execute(db);
  await sql`ALTER TABLE baton.queue_stats ADD COLUMN waiting bigint NOT NULL DEFAULT 0`.execute(db);

  await createReleaseFunctions(db);
  await sql`
    CREATE TRIGGER job_history_release_dependents AFTER INSERT ON baton.job_history
    FOR EACH ROW WHEN (NEW.dependents) EXECUTE FUNCTION baton.job_finished()`.execute(db);

  await createParentsRedriven(db);
}

/**
 * The release inside the finishing transaction, as this migration made it: `baton.parents_finished`
 * and the trigger's function calling it. Exported for migration 0019's way back down.
 */
export async function createReleaseFunctions(db: Kysely<any>): Promise<void> {
  await sql`
    CREATE OR REPLACE FUNCTION baton.parents_finished(finished bigint[], outcome text) RETURNS void
    LANGUAGE plpgsql AS $fn$
    DECLARE
      frontier bigint[] := finished;
      how text := outcome;
      freed bigint[];
      doomed bigint[];
      woken jsonb;
    BEGIN
      WHILE cardinality(frontier) > 0 LOOP
        -- A parent finishes once, so each open edge is resolved once; the child's counter is then
        -- moved under its row lock (READ COMMITTED re-reads a row it waited for), so of two
        -- transactions finishing its last two parents at once, exactly one sees it reach 0.
        WITH resolved AS (
          UPDATE baton.job_edges e SET parent_outcome = how
          WHERE e.parent = ANY(frontier) AND e.parent_outcome IS NULL
          RETURNING e.child
        ), per_child AS (
          -- In id order: the UPDATE below walks it to lock the children, so two releases sharing
          -- children take their locks in the same order (no deadlock between two single acks).
          SELECT child, count(*)::integer AS n FROM resolved GROUP BY child ORDER BY child
        ), counted AS (
          UPDATE baton.waiting_jobs w
          SET pending = w.pending - c.n,
              parents_failed = w.parents_failed + CASE WHEN how = 'completed' THEN 0 ELSE c.n END
          FROM per_child c WHERE w.id = c.child
          RETURNING w.id, w.pending, w.parents_failed, w.on_parent_failure
        )
        SELECT coalesce(array_agg(id) FILTER (WHERE on_parent_failure = 'cancel' AND parents_failed > 0), '{}'),
               coalesce(array_agg(id) FILTER (WHERE pending = 0 AND NOT (on_parent_failure = 'cancel' AND parents_failed > 0)), '{}')
        INTO doomed, freed FROM counted;

        IF cardinality(freed) > 0 THEN
          WITH moved AS (
            DELETE FROM baton.waiting_jobs w WHERE w.id = ANY(freed) RETURNING w.*
          ), due AS (
            INSERT INTO baton.jobs (slot, id, queue, group_key, priority, max_attempts, idempotency_key, created_at,
                                    payload, meta, timeout_ms, expires_at, unique_key, dependents, state, run_at,
                                    attempts, last_error, errors)
            SELECT baton.job_slot(id), id, queue, group_key, priority, max_attempts, idempotency_key, created_at,
                   payload, meta, timeout_ms, expires_at, unique_key, dependents, 'ready', run_at, 0, last_error, errors
            FROM moved WHERE run_at <= now()
            RETURNING queue
          ), later AS (
            INSERT INTO baton.scheduled_jobs (id, queue, group_key, priority, max_attempts, idempotency_key, created_at,
                                              payload, meta, timeout_ms, expires_at, unique_key, dependents, run_at,
                                              attempts, last_error, errors)
            SELECT id, queue, group_key, priority, max_attempts, idempotency_key, created_at,
                   payload, meta, timeout_ms, expires_at, unique_key, dependents, run_at, 0, last_error, errors
            FROM moved WHERE run_at > now()
            RETURNING queue
          )
          SELECT jsonb_object_agg(queue, n) INTO woken
          FROM (SELECT queue, count(*) AS n FROM due GROUP BY queue) x;
          -- Claims waiting on any replica (none sent it: 'r' is no replica's id); polling is the truth.
          IF woken IS NOT NULL THEN
            PERFORM pg_notify('baton_jobs', jsonb_build_object('r', 'postgres', 'q', woken)::text);
          END IF;
        END IF;

        -- A failed parent and the policy 'cancel': the child is cancelled now (its other parents are
        -- not waited for), and its own children meet a cancelled parent, in the next round.
        frontier := '{}';
        how := 'cancelled';
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
                   errors, NULL, payload, NULL, meta, timeout_ms, expires_at, unique_key,
                   -- Not flagged, so this insert does not call the trigger again: this loop carries the
                   -- cancellation on to the children itself (no recursion, however deep the chain).
                   false
            FROM gone
            RETURNING id
          )
          SELECT coalesce(array_agg(g.id), '{}') INTO frontier
          FROM gone g WHERE g.dependents AND g.id IN (SELECT id FROM filed);
        END IF;
      END LOOP;
    END
    $fn$`.execute(db);

  await sql`
    CREATE OR REPLACE FUNCTION baton.job_finished() RETURNS trigger LANGUAGE plpgsql AS $fn$
    BEGIN
      PERFORM baton.parents_finished(ARRAY[NEW.id], NEW.state);
      RETURN NULL;
    END
    $fn$`.execute(db);
}

/** `baton.parents_redriven` as this migration made it (also for migration 0019's way back down). */
export async function createParentsRedriven(db: Kysely<any>): Promise<void> {
  await sql`
    CREATE OR REPLACE FUNCTION baton.parents_redriven(redriven bigint[]) RETURNS void
    LANGUAGE plpgsql AS $fn$
    DECLARE
      frontier bigint[] := redriven;
      back bigint[];
    BEGIN
      WHILE cardinality(frontier) > 0 LOOP
        -- Children still waiting that counted these parents as failed (policy 'run'): pending again.
        WITH reopened AS (
          UPDATE baton.job_edges e SET parent_outcome = NULL
          FROM baton.waiting_jobs w
          WHERE e.parent = ANY(frontier) AND e.parent_outcome IN ('dead', 'cancelled') AND w.id = e.child
          RETURNING e.child
        ), per_child AS (
          SELECT child, count(*)::integer AS n FROM reopened GROUP BY child
        )
        UPDATE baton.waiting_jobs w SET pending = w.pending + c.n, parents_failed = w.parents_failed - c.n
        FROM per_child c WHERE w.id = c.child;

        -- Children these parents' failure cancelled, and that no other failed parent holds back.
        SELECT coalesce(array_agg(DISTINCT h.id), '{}') INTO back
        FROM baton.job_edges e
        JOIN baton.job_history h ON h.id = e.child AND h.state = 'cancelled'
                                 AND h.last_error->>'reason' = 'parent_failed'
        WHERE e.parent = ANY(frontier) AND e.parent_outcome IN ('dead', 'cancelled')
          AND NOT EXISTS (SELECT 1 FROM baton.job_edges o
                          WHERE o.child = e.child AND o.parent <> ALL(frontier)
                            AND o.parent_outcome IN ('dead', 'cancelled'));
        EXIT WHEN cardinality(back) = 0;

        UPDATE baton.job_edges e SET parent_outcome = NULL
        WHERE e.child = ANY(back) AND e.parent = ANY(frontier);
        WITH moved AS (
          DELETE FROM baton.job_history h WHERE h.id = ANY(back) AND h.state = 'cancelled' RETURNING h.*
        )
        INSERT INTO baton.waiting_jobs (id, queue, group_key, priority, run_at, attempts, max_attempts, idempotency_key,
                                        created_at, last_error, errors, payload, meta, timeout_ms, expires_at, unique_key,
                                        dependents, pending, parents_failed, on_parent_failure)
        SELECT m.id, m.queue, m.group_key, m.priority, m.run_at, 0, m.max_attempts, m.idempotency_key, m.created_at,
               NULL, m.errors, m.payload, m.meta, m.timeout_ms, m.expires_at, m.unique_key,
               EXISTS (SELECT 1 FROM baton.job_edges d WHERE d.parent = m.id),
               (SELECT count(*) FROM baton.job_edges p WHERE p.child = m.id AND p.parent_outcome IS NULL),
               0,
               (SELECT p.on_parent_failure FROM baton.job_edges p WHERE p.child = m.id LIMIT 1)
        FROM moved m;
        -- Their own children, cancelled in the cascade, come back with them.
        frontier := back;
      END LOOP;
    END
    $fn$`.execute(db);
}

export async function down(db: Kysely<any>): Promise<void> {
  await sql`DROP TRIGGER IF EXISTS job_history_release_dependents ON baton.job_history`.execute(db);
  await sql`DROP FUNCTION IF EXISTS baton.job_finished()`.execute(db);
  await sql`DROP FUNCTION IF EXISTS baton.parents_finished(bigint[], text)`.execute(db);
  await sql`DROP FUNCTION IF EXISTS baton.parents_redriven(bigint[])`.execute(db);
  await sql`DROP TABLE IF EXISTS baton.job_edges`.execute(db);
  await sql`DROP TABLE IF EXISTS baton.waiting_jobs`.execute(db);
  await sql`ALTER TABLE baton.queue_stats DROP COLUMN IF EXISTS waiting`.execute(db);
  for (const table of ['baton.job_history', 'baton.scheduled_jobs', 'baton.jobs']) {
    await sql`ALTER TABLE ${sql.table(table)} DROP COLUMN IF EXISTS dependents`.execute(db);
  }
}
