-- cronbox.start_run(run_id, worker, p_now): optional; a worker says it started the run.
-- Locks the run row; dispatched/delivered -> running, records the worker, and renews the
-- lease from now. Returns the lease deadline. Raises 55000 if the run is not startable.
CREATE OR REPLACE FUNCTION cronbox.start_run(
    run_id bigint,
    worker text,
    p_now timestamptz DEFAULT now()
) RETURNS timestamptz
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_run cronbox.run;
    v_deadline timestamptz;
BEGIN
    SELECT * INTO v_run FROM cronbox.run r WHERE r.run_id = start_run.run_id FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'run_id: no run %', start_run.run_id USING ERRCODE = 'no_data_found';
    END IF;
    IF v_run.state NOT IN ('dispatched', 'delivered') THEN
        RAISE EXCEPTION 'run_id: run % is %, it cannot be started', v_run.run_id, v_run.state
            USING ERRCODE = 'object_not_in_prerequisite_state';
    END IF;
    SELECT p_now + j.timeout INTO v_deadline FROM cronbox.job j WHERE j.job_id = v_run.job_id;
    UPDATE cronbox.run r SET
        state = 'running', started_at = p_now, worker = start_run.worker,
        lease_until = coalesce(v_deadline, p_now + interval '5 minutes')
    WHERE r.run_id = v_run.run_id;
    RETURN coalesce(v_deadline, p_now + interval '5 minutes');
END
$$;

COMMENT ON FUNCTION cronbox.start_run(bigint, text, timestamptz) IS
'Worker (optional): marks a dispatched or delivered run running on worker and renews its lease; returns the deadline.';
