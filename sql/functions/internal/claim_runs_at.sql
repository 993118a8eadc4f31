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
-- Where the queue is one walk (plain PostgreSQL), a claim starts after the last key the session
-- took from the queue (outbox_queue_idx ends with outbox_id: migration 0469), kept in the
-- session (custom setting cronbox.claim_cursor, set in the claim's transaction: a claim rolled
-- back leaves it as it was). A claimed run's row moves to available_at 'infinity', but its old
-- index entry stays until no snapshot can see the old version, and a walk from the queue's start
-- passed each one again with a heap fetch (a minute's burst under one available_at: the whole
-- burst claimed so far, per claim). From the cursor, a claim passes only what the other workers
-- took since its last claim. The cursor is a hint, never a bound: a walk from the queue's first
-- entry, as before, follows when the walk from the cursor comes short of n and the session's
-- last such walk is a second old or more (an idle worker polling often does not walk the
-- queue's whole claimed past on every poll), and replaces it after 8 claims in a row from the
-- cursor; a run the cursor passed over (locked by another transaction when walked, or
-- committed later with an earlier key: a dispatch begun before the claim) is taken by that walk
-- at the latest.
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
-- The walk is an index scan in key order, stopped at n rows: a bitmap scan reads every entry from
-- the cursor to p_now and sorts them (the generic plan took one when the cursor's bound made the
-- range look small); the update's probes by key are index scans all the same.
SET enable_bitmapscan = off
AS $$
DECLARE
    v_walks integer[];
    v_set integer[];
    v_start integer;
    v_taken integer := 0;
    v_n integer;
    v_own bigint[];         -- a limited caller's jobs (NULL: every job)
    -- the session's cursor: [queue, claims from it in a row, available_at, outbox_id, the time
    -- (p_now) of the last walk from the queue's start]
    v_cursor jsonb;
    v_cursor_claims integer := 0;
    v_from_at timestamptz := '-infinity';  -- the walk takes keys (available_at, outbox_id) after these
    v_from_id bigint := -1;                -- (from the queue's start: outbox_id is never negative)
    v_full_at timestamptz := p_now;
    v_cursor_on boolean := false;
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
    -- the cursor where the outbox is one walk and not distributed (plain PostgreSQL; with the
    -- Citus layer, hot tables still the coordinator's own): a distributed outbox is walked bucket
    -- by bucket from each one's start, one task each
    IF array_length(v_walks, 1) = 1 THEN
        -- (pg_dist_partition read only where the Citus layer is: elsewhere there is none)
        IF to_regclass('cronbox.bucket') IS NULL THEN
            v_cursor_on := true;
        ELSE
            v_cursor_on := NOT EXISTS (SELECT 1 FROM pg_catalog.pg_dist_partition p
                                       WHERE p.logicalrelid = 'cronbox.outbox'::regclass);
        END IF;
    END IF;
    IF v_cursor_on THEN
        v_cursor := nullif(current_setting('cronbox.claim_cursor', true), '')::jsonb;
        IF v_cursor ->> 0 = claim_runs_at.queue AND (v_cursor ->> 1)::integer < 8 THEN
            v_from_at := (v_cursor ->> 2)::timestamptz;
            v_from_id := (v_cursor ->> 3)::bigint;
            v_full_at := (v_cursor ->> 4)::timestamptz;
            v_cursor_claims := (v_cursor ->> 1)::integer + 1;
        END IF;
    END IF;
    FOR i IN 0 .. array_length(v_walks, 1) - 1 LOOP
      v_set := ARRAY(SELECT unnest(v_walks[(v_start + i) % array_length(v_walks, 1) + 1 : (v_start + i) % array_length(v_walks, 1) + 1]));
      -- the walk from the cursor, then (when it came short, at most once a second) from the
      -- queue's start
      FOR pass IN 1 .. 2 LOOP
        EXIT WHEN v_taken >= claim_runs_at.n;
        EXIT WHEN pass = 2 AND (v_cursor_claims = 0
                                OR (p_now >= v_full_at AND p_now < v_full_at + interval '1 second'));
        IF pass = 2 THEN
            v_from_at := '-infinity';
            v_from_id := -1;
            v_cursor_claims := 0;
            v_full_at := p_now;
        END IF;
        -- The run's outbox row stays the run: running on this worker, under the run's lease (its
        -- timeout), in place (HOT: no indexed column changes). By key, never a join to picked:
        -- the plan is kept for the session, and one made while the statistics said the outbox
        -- was empty (VACUUM after a drain) walked the whole outbox once per row taken (a pull
        -- bench stalled a minute per claim on it).
        RETURN QUERY
        WITH picked AS (
            SELECT o.outbox_id, o.available_at
            FROM cronbox.outbox o
            WHERE o.bucket = ANY (v_set) AND o.kind = 'run' AND o.queue = claim_runs_at.queue
              AND o.available_at <= p_now
              AND (o.available_at, o.outbox_id) > (v_from_at, v_from_id)
              AND (o.lease_until IS NULL OR o.lease_until <= p_now)
              -- a run delivered or running holds its own lease (its timeout): never taken again
              AND o.state IS DISTINCT FROM 'delivered' AND o.state IS DISTINCT FROM 'running'
              AND (v_own IS NULL OR o.job_id = ANY (v_own))
            ORDER BY o.available_at, o.outbox_id
            LIMIT claim_runs_at.n - v_taken
            FOR UPDATE SKIP LOCKED
        ),
        -- the session's cursor: the last key taken (v_cursor_on: plain PostgreSQL)
        cursor AS MATERIALIZED (
            SELECT set_config('cronbox.claim_cursor',
                              jsonb_build_array(claim_runs_at.queue, v_cursor_claims, l.available_at, l.outbox_id,
                                                v_full_at)::text,
                              false)
            FROM (SELECT picked.available_at, picked.outbox_id FROM picked
                  ORDER BY picked.available_at DESC, picked.outbox_id DESC LIMIT 1) l
            WHERE v_cursor_on
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
        -- (the cursor's one row, or none: read so that it is set; a CTE scan, evaluated once)
        FROM started s LEFT JOIN cursor ON true
        ORDER BY s.outbox_id;
        GET DIAGNOSTICS v_n = ROW_COUNT;
        v_taken := v_taken + v_n;
      END LOOP;
    END LOOP;
    -- a walk from the start that took nothing set no cursor: keep its time (from the start again)
    IF v_taken = 0 AND v_cursor_on AND v_cursor_claims = 0 THEN
        PERFORM set_config('cronbox.claim_cursor',
                           jsonb_build_array(claim_runs_at.queue, 0, '-infinity'::timestamptz, -1, p_now)::text, false);
    END IF;
END
$$;

COMMENT ON FUNCTION cronbox.claim_runs_at(text, text, integer, boolean, timestamp with time zone) IS
'Internal (no cronbox role may execute it): the body of cronbox.claim_runs(text, text, integer, boolean) with the time as p_now; tests use it to fix the clock. Pull-mode worker: claims up to n available runs of a queue (SKIP LOCKED: claimers get disjoint runs), marks them running on worker with a lease of the job''s timeout, returns the messages with their deadline (with_message false: the message column NULL, the columns beside it as ever).';

ALTER FUNCTION cronbox.claim_runs_at(text, text, integer, boolean, timestamp with time zone) OWNER TO cronbox_runner;
REVOKE ALL ON FUNCTION cronbox.claim_runs_at(text, text, integer, boolean, timestamp with time zone) FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
