-- cronbox.withdraw_early_skip_runs(p_jobs, p_now, p_buckets): before anything makes another run
-- of a job unfinished (dispatch of a retry, a backfilled or an after-job's fire, trigger(),
-- rerun(), redrive()), the job's early 'skip' run, decided ahead of its fire time by
-- cronbox.dispatch_ahead on the premise that no run of the job would be unfinished by then, is
-- taken back as if it had never been written: its outbox row deleted (no history row: it never
-- ran, and nothing was decided that its fire time will not decide again), its future written
-- back (fire, due time, priority, queue), the job's statistics as they were before it
-- (job_stat.early_prev_*: active runs, last fire, last run and its state). The fire is then
-- decided at its time, against the run made now, as without early dispatch.
-- Found by the marker job_stat.early_due_at (a probe by key per job), once a short walk of the
-- outbox rows waiting for a later time (queue by queue) finds an early 'skip' run among them
-- or many rows (usually neither); the
-- run is job_stat.last_run_id while the marker is set and its run still waits, since nothing
-- dispatches a run of the job meanwhile without coming here first (and the walk finds a run
-- that waits). A run already ended (cancel()), or one whose time has come, is left alone (the
-- delete checks the row is an early 'skip' run still waiting): the marker is just cleared.
-- Call with the jobs locked. Statements as dispatch's on Citus: the bucket set's rows (job_stat,
-- job_future) or the outbox with the values read before, never both. Returns the count.
CREATE OR REPLACE FUNCTION cronbox.withdraw_early_skip_runs(
    p_jobs bigint[],
    p_now timestamptz,
    p_buckets integer[] DEFAULT NULL
) RETURNS integer
LANGUAGE plpgsql
SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
SET jit = off
SET enable_seqscan = off  -- a plan kept from an empty table: docs/architecture.md, SQL conventions
AS $$
DECLARE
    v_marked bigint[];    -- jobs with an early 'skip' run still to come
    v_runs bigint[];      -- their early runs
    v_back bigint[];      -- the jobs whose early run was withdrawn
    v_fire timestamptz[];
    v_due timestamptz[];
    v_prio integer[];
    v_attempt integer[];
    v_queue text[];
    v_bucket integer[];
BEGIN
    -- Usually no early 'skip' run waits at all: a probe of outbox_flagged_idx (the flagged rows
    -- alone, migration 0465) per queue with rows (a loose index scan of outbox_queue_idx) says so
    -- and spares the probe per job. Only when no flagged row waits for a later time is nothing
    -- withdrawable; a marker left set then is harmless (its run is looked for again, by the same
    -- rule, on the next call). On plain PostgreSQL only (no cronbox.bucket): with the Citus
    -- layer, a statement of this call reads the bucket set's tables or the coordinator's with
    -- the values read before, and the outbox policies' look at cronbox.job is not planned there
    -- (the probes per job serve).
    IF to_regclass('cronbox.bucket') IS NULL THEN
        IF NOT EXISTS (
            WITH RECURSIVE queues(q) AS (
                (SELECT o.queue FROM cronbox.outbox o
                 WHERE (p_buckets IS NULL OR o.bucket = ANY (p_buckets)) ORDER BY o.queue LIMIT 1)
                UNION ALL
                SELECT (SELECT o.queue FROM cronbox.outbox o
                        WHERE (p_buckets IS NULL OR o.bucket = ANY (p_buckets)) AND o.queue > queues.q
                        ORDER BY o.queue LIMIT 1)
                FROM queues WHERE queues.q IS NOT NULL
            )
            SELECT 1
            FROM queues CROSS JOIN LATERAL (
                SELECT 1 FROM cronbox.outbox o
                WHERE (p_buckets IS NULL OR o.bucket = ANY (p_buckets)) AND o.queue = queues.q
                  AND o.claim_at_due AND o.available_at > p_now
                ORDER BY o.available_at
                LIMIT 1) w
            WHERE queues.q IS NOT NULL) THEN
            RETURN 0;
        END IF;
    END IF;
    SELECT array_agg(s.job_id), array_agg(s.last_run_id) INTO v_marked, v_runs
    FROM cronbox.job_stat s
    WHERE (p_buckets IS NULL OR s.bucket = ANY (p_buckets)) AND s.job_id = ANY (p_jobs)
      AND s.early_due_at > p_now;
    IF v_marked IS NULL THEN
        RETURN 0;
    END IF;
    -- The early runs still waiting for their time (no relay may hold one: claim_at_due).
    WITH gone AS (
        DELETE FROM cronbox.outbox o
        WHERE (p_buckets IS NULL OR o.bucket = ANY (p_buckets)) AND o.outbox_id = ANY (v_runs) AND o.kind = 'run' AND o.claim_at_due AND o.state = 'dispatched'
          AND o.available_at > p_now AND (o.lease_until IS NULL OR o.lease_until <= p_now)
          AND o.job_id = ANY (v_marked)
        RETURNING o.job_id, o.fire_at, o.due_at, o.priority, o.attempt, o.queue, o.bucket
    )
    SELECT array_agg(g.job_id), array_agg(g.fire_at), array_agg(g.due_at), array_agg(g.priority),
           array_agg(g.attempt), array_agg(g.queue), array_agg(g.bucket)
      INTO v_back, v_fire, v_due, v_prio, v_attempt, v_queue, v_bucket
    FROM gone g;
    -- Their futures back, as saturation wrote them, and the statistics as before the early run;
    -- the other marked jobs' markers cleared.
    WITH back AS (
        INSERT INTO cronbox.job_future (job_id, fire_at, due_at, priority, attempt, origin, queue, bucket)
        SELECT b.job_id, b.fire_at, b.due_at, b.priority, b.attempt, 'schedule', b.queue, b.bucket
        FROM unnest(v_back, v_fire, v_due, v_prio, v_attempt, v_queue, v_bucket)
             AS b(job_id, fire_at, due_at, priority, attempt, queue, bucket)
        RETURNING 1  -- not a COPY on Citus (refused under row security): docs/citus.md
    )
    UPDATE cronbox.job_stat s SET
        active_runs = CASE WHEN s.job_id = ANY (v_back) THEN s.active_runs - 1 ELSE s.active_runs END,
        last_fire_at = CASE WHEN s.job_id = ANY (v_back) THEN s.early_prev_fire_at ELSE s.last_fire_at END,
        last_run_id = CASE WHEN s.job_id = ANY (v_back) THEN s.early_prev_run_id ELSE s.last_run_id END,
        last_run_state = CASE WHEN s.job_id = ANY (v_back) THEN s.early_prev_state ELSE s.last_run_state END,
        early_due_at = NULL, early_prev_fire_at = NULL, early_prev_run_id = NULL, early_prev_state = NULL
    WHERE (p_buckets IS NULL OR s.bucket = ANY (p_buckets)) AND s.job_id = ANY (v_marked);
    IF v_back IS NOT NULL THEN
        PERFORM pg_notify('cronbox_future', '');  -- a fire due again: dispatch's at its time
    END IF;
    RETURN coalesce(cardinality(v_back), 0);
END
$$;

COMMENT ON FUNCTION cronbox.withdraw_early_skip_runs(bigint[], timestamp with time zone, integer[]) IS
'Internal: takes back the early ''skip'' runs of p_jobs still waiting for their time (job_stat.early_due_at), without a trace: outbox row deleted, future written back, statistics as before. Called, with the jobs locked, before anything makes another run of them unfinished. Returns the count.';

ALTER FUNCTION cronbox.withdraw_early_skip_runs(bigint[], timestamp with time zone, integer[]) OWNER TO cronbox_owner;
REVOKE ALL ON FUNCTION cronbox.withdraw_early_skip_runs(bigint[], timestamp with time zone, integer[]) FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
