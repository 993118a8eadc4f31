-- Internal: the body of cronbox.heartbeat, with the time as its last parameter p_now. The public
-- cronbox.heartbeat passes now(); no cronbox role may execute this one (tests call it as the
-- owner or a superuser to fix the clock).
-- cronbox.heartbeat_at(run_id, worker, p_now): a worker says it is alive. Extends the lease to
-- now + the job's timeout and returns 'continue'; returns 'cancel' (lease untouched) when
-- cancellation was requested, or the run is no longer this worker's (lost, timed out,
-- superseded, finished, or started by another worker). Locks the run's outbox row only (the run
-- in flight); history is read only for a run not in flight, to tell a final run from an unknown id.
-- Raises P0002 for an unknown run.
-- Its bucket: on a database with buckets (Citus), the one its id carries (cronbox.run_bucket),
-- every statement on that bucket's rows; a run not there (an id drawn without its bucket) is
-- looked up by key over every bucket, without a lock, then updated in its bucket. Plain
-- PostgreSQL: no bucket filter (one bucket).
CREATE OR REPLACE FUNCTION cronbox.heartbeat_at(
    run_id bigint,
    worker text DEFAULT NULL,
    p_now timestamptz DEFAULT now()
) RETURNS text
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off  -- short OLTP statements: compiling costs more than running
AS $$
DECLARE
    v_found boolean;
    v_bucket integer;  -- the run's bucket; NULL: no buckets (plain PostgreSQL)
    v_tries integer := 1;
BEGIN
    IF heartbeat_at.run_id IS NULL THEN
        RAISE EXCEPTION 'run_id: must not be NULL' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    PERFORM cronbox.assert_worker(heartbeat_at.worker);
    -- the owner rule (cronbox.caller_hidden_runs: NULL for every worker, at once): another
    -- owner's run is an unknown run to a limited caller
    IF cronbox.caller_hidden_runs(ARRAY[heartbeat_at.run_id]) <> '{}' THEN
        RAISE EXCEPTION 'run_id: no run %', heartbeat_at.run_id USING ERRCODE = 'no_data_found';
    END IF;
    IF to_regclass('cronbox.bucket') IS NOT NULL THEN
        -- (-1, no bucket's: an id whose bits name no bucket, looked up below)
        v_bucket := coalesce(cronbox.run_bucket(heartbeat_at.run_id), -1);
    END IF;
    LOOP
        UPDATE cronbox.outbox o SET
            run_lease_until = p_now + coalesce((SELECT j.timeout FROM cronbox.job j
                                                WHERE (v_bucket IS NULL OR j.bucket = v_bucket) AND j.job_id = o.job_id),
                                               interval '5 minutes')
        WHERE (v_bucket IS NULL OR o.bucket = v_bucket) AND o.outbox_id = heartbeat_at.run_id AND o.kind = 'run'
          AND NOT o.cancel_requested
          AND (heartbeat_at.worker IS NULL OR o.worker IS NULL OR o.worker = heartbeat_at.worker);
        IF FOUND THEN
            RETURN 'continue';
        END IF;
        SELECT true INTO v_found FROM cronbox.outbox o
        WHERE (v_bucket IS NULL OR o.bucket = v_bucket) AND o.outbox_id = heartbeat_at.run_id AND o.kind = 'run';
        EXIT WHEN v_found OR v_bucket IS NULL OR v_tries > 1;
        -- not in the bucket its id names (an id drawn without its bucket): found by key, then again there
        SELECT o.bucket INTO v_bucket FROM cronbox.outbox o WHERE o.outbox_id = heartbeat_at.run_id AND o.kind = 'run';
        EXIT WHEN v_bucket IS NULL;
        v_tries := v_tries + 1;
    END LOOP;
    IF v_found IS NULL THEN
        SELECT true INTO v_found FROM cronbox.run r WHERE r.run_id = heartbeat_at.run_id;
    END IF;
    IF v_found IS NULL THEN
        RAISE EXCEPTION 'run_id: no run %', heartbeat_at.run_id USING ERRCODE = 'no_data_found';
    END IF;
    RETURN 'cancel';
END
$$;

COMMENT ON FUNCTION cronbox.heartbeat_at(bigint, text, timestamp with time zone) IS
'Internal (no cronbox role may execute it): the body of cronbox.heartbeat(bigint, text) with the time as p_now; tests use it to fix the clock. Worker: extends the run''s lease by the job''s timeout and returns ''continue''; returns ''cancel'' when cancellation was requested or the run is no longer this worker''s (lost, finished, superseded). Raises P0002 for an unknown run.';

ALTER FUNCTION cronbox.heartbeat_at(bigint, text, timestamp with time zone) OWNER TO cronbox_runner;
REVOKE ALL ON FUNCTION cronbox.heartbeat_at(bigint, text, timestamp with time zone) FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
