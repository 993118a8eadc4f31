-- Internal: the body of cronbox.claim_runs, with the time as its last parameter p_now. The public
-- cronbox.claim_runs passes now(); no cronbox role may execute this one (tests call it as the
-- owner or a superuser to fix the clock).
-- cronbox.claim_runs_at(queue, worker, n, with_message, p_now): pull mode, for workers that talk to PostgreSQL
-- instead of receiving pushes (queues routed to the `postgres` sink). Takes up to n
-- available run messages of the queue, oldest first, FOR UPDATE SKIP LOCKED on
-- outbox_queue_idx (claimers get disjoint runs), and marks those runs (their outbox rows: a run
-- is its outbox row until its final report) running on worker with a lease of the job's timeout. Returns the messages, deadline included;
-- its row leaves the claims' walk (available_at 'infinity': the update is not heap-only anyway);
-- with with_message false the message column is NULL (the columns beside it are returned as ever:
-- the worker kit reads those, and building a jsonb object per run costs ~2 µs of a claim's ~10).
-- By bucket (docs/citus.md, "A queue spans buckets"): every statement reads and writes a set of
-- buckets (`bucket = ANY (v_set)`), visited as cronbox.bucket_walks says: where the outbox is
-- distributed by bucket one bucket per statement (one shard), in turn from a random one until
-- n runs are taken; anywhere else all of them in one statement (plain PostgreSQL: bucket 0).
-- One statement per set, as before: the walk (FOR UPDATE SKIP LOCKED) and the update by key,
-- the run's lease end computed in UTC (IMMUTABLE), the message built outside the update (Citus
-- runs no STABLE function of a row's columns in an UPDATE, nothing mutable in its RETURNING:
-- docs/citus.md).
CREATE OR REPLACE FUNCTION cronbox.claim_runs_at(
    queue text,
    worker text,
    n integer DEFAULT 1,
    with_message boolean DEFAULT true,
    p_now timestamptz DEFAULT now()
) RETURNS TABLE (run_id bigint, job text, payload jsonb, fire_at timestamptz, attempt integer,
                 deadline timestamptz, idempotency_key text, message jsonb)
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
-- Row estimates through CTEs are rough; JIT compiling this short statement costs more than it runs.
SET jit = off
-- One plan per session: its statements prune run partitions at run time (BETWEEN on the
-- batch's bounds), so re-planning each call for plan-time pruning only costs (a custom plan
-- per statement made a one-run complete_run ~3 ms; generic: ~0.8 ms, batches no slower).
SET plan_cache_mode = force_generic_plan
SET enable_seqscan = off  -- a plan kept from an empty table: docs/architecture.md, SQL conventions
AS $$
DECLARE
    v_walks integer[];
    v_set integer[];
    v_start integer;
    v_taken integer := 0;
    v_n integer;
    v_own bigint[];         -- a limited caller's jobs (NULL: every job)
BEGIN
    -- Runs as cronbox_runner, whom row security lets through (docs/architecture.md, "Row security
    -- on the batch paths"): the owner rule is applied here, once per call. Every worker and
    -- process member takes any run; a caller limited to its own schedules (one reaching this
    -- through another role's SECURITY DEFINER function) only runs of the jobs it owns, as the
    -- policies let it.
    IF NOT cronbox.caller_writes_all() THEN
        v_own := ARRAY(SELECT j.job_id FROM cronbox.job j WHERE j.owner = cronbox.caller());
    END IF;
    PERFORM cronbox.assert_worker(claim_runs_at.worker);
    IF claim_runs_at.n IS NULL OR claim_runs_at.n NOT BETWEEN 1 AND 1000 THEN
        RAISE EXCEPTION 'n: must be between 1 and 1000, got %', coalesce(claim_runs_at.n::text, 'NULL')
            USING ERRCODE = CASE WHEN claim_runs_at.n IS NULL THEN 'null_value_not_allowed' ELSE 'invalid_parameter_value' END;
    END IF;
    IF length(claim_runs_at.queue) > 100 THEN
        RAISE EXCEPTION 'queue: must be at most 100 characters, got %', length(claim_runs_at.queue)
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF claim_runs_at.with_message IS NULL THEN
        RAISE EXCEPTION 'with_message: must be true or false' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    IF claim_runs_at.queue IS NULL OR claim_runs_at.queue = '' THEN
        RAISE EXCEPTION 'queue: must name a queue' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    IF claim_runs_at.worker IS NULL OR claim_runs_at.worker = '' THEN
        RAISE EXCEPTION 'worker: must name the worker' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    IF claim_runs_at.n IS NULL OR claim_runs_at.n < 1 THEN
        RAISE EXCEPTION 'n: must be at least 1, got %', claim_runs_at.n USING ERRCODE = 'invalid_parameter_value';
    END IF;
    v_walks := cronbox.bucket_walks('cronbox.outbox');
    v_start := floor(random() * array_length(v_walks, 1))::integer;
    FOR i IN 0 .. array_length(v_walks, 1) - 1 LOOP
        EXIT WHEN v_taken >= claim_runs_at.n;
        v_set := ARRAY(SELECT unnest(v_walks[(v_start + i) % array_length(v_walks, 1) + 1 : (v_start + i) % array_length(v_walks, 1) + 1]));
        -- The run's outbox row stays the run: running on this worker, under the run's lease (its
        -- timeout), in place (HOT: no indexed column changes). By key, never a join to picked:
        -- the plan is kept for the session, and one made while the statistics said the outbox
        -- was empty (VACUUM after a drain) walked the whole outbox once per row taken (a pull
        -- bench stalled a minute per claim on it).
        RETURN QUERY
        WITH picked AS (
            SELECT o.outbox_id
            FROM cronbox.outbox o
            WHERE o.bucket = ANY (v_set) AND o.kind = 'run' AND o.queue = claim_runs_at.queue
              AND o.available_at <= p_now
              AND (o.lease_until IS NULL OR o.lease_until <= p_now)
              -- a run delivered or running holds its own lease (its timeout): never taken again
              AND o.state IS DISTINCT FROM 'delivered' AND o.state IS DISTINCT FROM 'running'
              AND (v_own IS NULL OR o.job_id = ANY (v_own))
            ORDER BY o.available_at
            LIMIT claim_runs_at.n - v_taken
            FOR UPDATE SKIP LOCKED
        ),
        started AS (
            UPDATE cronbox.outbox o SET
                state = 'running', delivered_at = p_now, started_at = p_now,
                worker = claim_runs_at.worker,
                -- in UTC: IMMUTABLE, where timestamptz + interval is STABLE (docs/citus.md)
                run_lease_until = ((p_now AT TIME ZONE 'UTC') + o.timeout) AT TIME ZONE 'UTC',
                lease_until = NULL,
                lease_owner = NULL,
                -- out of every claim's walk of outbox_queue_idx: a running row is never claimed
                -- again, and the next claims of the queue passed it row by row (a worker's batch
                -- in flight is up to 1,000 rows). Free: the run's lease is indexed, so this
                -- update is not heap-only anyway; nothing reads a run's available_at once it runs.
                available_at = 'infinity'
            WHERE o.bucket = ANY (v_set) AND o.outbox_id = ANY (ARRAY(SELECT picked.outbox_id FROM picked))
            RETURNING o.outbox_id, o.run_lease_until, o.message, o.job_name, o.queue, o.payload, o.fire_at, o.attempt
        )
        -- the message built once per run, deadline included (one object); the other columns
        -- from the row itself, the values the message was built from, not read back out of it (a
        -- text, a jsonb and a timestamptz parsed per run); a redriven run's row carries its
        -- message as sent, which they come from as before; no message when the caller wants none
        SELECT s.outbox_id,
               CASE WHEN s.message IS NULL THEN s.job_name ELSE s.message ->> 'job' END,
               CASE WHEN s.message IS NULL THEN s.payload ELSE s.message -> 'payload' END,
               CASE WHEN s.message IS NULL THEN s.fire_at ELSE (s.message ->> 'fire_at')::timestamptz END,
               CASE WHEN s.message IS NULL THEN s.attempt ELSE (s.message ->> 'attempt')::integer END,
               s.run_lease_until,
               CASE WHEN s.message IS NULL THEN textcat(textcat(s.outbox_id::text, ':'), s.attempt::text)
                    ELSE s.message ->> 'idempotency_key' END,
               CASE WHEN NOT claim_runs_at.with_message THEN NULL
                    WHEN s.message IS NULL
                    THEN cronbox.run_message(s.outbox_id, s.job_name, s.queue, s.payload, s.fire_at, s.attempt,
                                             s.run_lease_until)
                    ELSE s.message || jsonb_build_object('deadline', s.run_lease_until) END
        FROM started s
        ORDER BY s.outbox_id;
        GET DIAGNOSTICS v_n = ROW_COUNT;
        v_taken := v_taken + v_n;
    END LOOP;
END
$$;

COMMENT ON FUNCTION cronbox.claim_runs_at(text, text, integer, boolean, timestamp with time zone) IS
'Internal (no cronbox role may execute it): the body of cronbox.claim_runs(text, text, integer, boolean) with the time as p_now; tests use it to fix the clock. Pull-mode worker: claims up to n available runs of a queue (SKIP LOCKED: claimers get disjoint runs), marks them running on worker with a lease of the job''s timeout, returns the messages with their deadline (with_message false: the message column NULL, the columns beside it as ever).';

ALTER FUNCTION cronbox.claim_runs_at(text, text, integer, boolean, timestamp with time zone) OWNER TO cronbox_runner;
REVOKE ALL ON FUNCTION cronbox.claim_runs_at(text, text, integer, boolean, timestamp with time zone) FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
