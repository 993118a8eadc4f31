-- cronbox.heartbeat(run_id, worker, p_now): a worker says it is alive. Extends the lease to
-- now + the job's timeout and returns 'continue'; returns 'cancel' (lease untouched) when
-- cancellation was requested, or the run is no longer this worker's (lost, timed out,
-- superseded, finished, or started by another worker). Locks the run row only.
-- Raises 02000 for an unknown run.
CREATE OR REPLACE FUNCTION cronbox.heartbeat(
    run_id bigint,
    worker text DEFAULT NULL,
    p_now timestamptz DEFAULT now()
) RETURNS text
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
SET jit = off  -- short OLTP statements: compiling costs more than running
AS $$
DECLARE
    v_found boolean;
BEGIN
    UPDATE cronbox.run r SET
        lease_until = p_now + coalesce((SELECT j.timeout FROM cronbox.job j WHERE j.job_id = r.job_id),
                                       interval '5 minutes')
    WHERE r.run_id = heartbeat.run_id
      AND r.state IN ('dispatched', 'delivered', 'running')
      AND NOT r.cancel_requested
      AND (heartbeat.worker IS NULL OR r.worker IS NULL OR r.worker = heartbeat.worker);
    IF FOUND THEN
        RETURN 'continue';
    END IF;
    SELECT true INTO v_found FROM cronbox.run r WHERE r.run_id = heartbeat.run_id;
    IF v_found IS NULL THEN
        RAISE EXCEPTION 'run_id: no run %', heartbeat.run_id USING ERRCODE = 'no_data_found';
    END IF;
    RETURN 'cancel';
END
$$;

COMMENT ON FUNCTION cronbox.heartbeat(bigint, text, timestamptz) IS
'Worker: extends the run''s lease by the job''s timeout and returns ''continue''; returns ''cancel'' when cancellation was requested or the run is no longer this worker''s (lost, finished, superseded). Raises 02000 for an unknown run.';
