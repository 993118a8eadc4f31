-- Internal: the body of cronbox.heartbeat, with the time as its last parameter p_now. The public
-- cronbox.heartbeat passes now(); no cronbox role may execute this one (tests call it as the
-- owner or a superuser to fix the clock).
-- cronbox.heartbeat_at(run_id, worker, p_now): a worker says it is alive. Extends the lease to
-- now + the job's timeout and returns 'continue'; returns 'cancel' (lease untouched) when
-- cancellation was requested, or the run is no longer this worker's (lost, timed out,
-- superseded, finished, or started by another worker). Locks the run's outbox row only (the run
-- in flight); history is read only for a run not in flight, to tell a final run from an unknown id.
-- Raises P0002 for an unknown run.
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
    UPDATE cronbox.outbox o SET
        run_lease_until = p_now + coalesce((SELECT j.timeout FROM cronbox.job j WHERE j.job_id = o.job_id),
                                       interval '5 minutes')
    WHERE o.outbox_id = heartbeat_at.run_id AND o.kind = 'run'
      AND NOT o.cancel_requested
      AND (heartbeat_at.worker IS NULL OR o.worker IS NULL OR o.worker = heartbeat_at.worker);
    IF FOUND THEN
        RETURN 'continue';
    END IF;
    SELECT true INTO v_found FROM cronbox.outbox o WHERE o.outbox_id = heartbeat_at.run_id AND o.kind = 'run';
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
