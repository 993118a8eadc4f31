-- cronbox.fail_run(run_id, error, retryable, p_now): a worker reports failure.
-- Locks the run row; allowed from dispatched/delivered/running. A late report for a run
-- already finished is kept in late_report only. Bumps the job's failure streak.
CREATE OR REPLACE FUNCTION cronbox.fail_run(
    run_id bigint,
    error text,
    retryable boolean DEFAULT true,
    p_now timestamptz DEFAULT now()
) RETURNS text
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_run cronbox.run;
BEGIN
    SELECT * INTO v_run FROM cronbox.run r WHERE r.run_id = fail_run.run_id FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'run_id: no run %', fail_run.run_id USING ERRCODE = 'no_data_found';
    END IF;
    IF v_run.state NOT IN ('dispatched', 'delivered', 'running') THEN
        UPDATE cronbox.run r SET late_report = jsonb_build_object(
            'report', 'failed', 'error', fail_run.error, 'at', p_now, 'state_then', v_run.state)
        WHERE r.run_id = v_run.run_id;
        RETURN v_run.state;
    END IF;
    UPDATE cronbox.run r SET
        state = 'failed', finished_at = p_now, error = fail_run.error, lease_until = NULL
    WHERE r.run_id = v_run.run_id;
    UPDATE cronbox.job j SET
        active_runs = greatest(j.active_runs - 1, 0),
        last_run_state = 'failed',
        consecutive_failures = j.consecutive_failures + 1
    WHERE j.job_id = v_run.job_id;
    RETURN 'failed';
END
$$;

COMMENT ON FUNCTION cronbox.fail_run(bigint, text, boolean, timestamptz) IS
'Worker: marks a run failed with an error text; retryable => false skips remaining attempts. A late report for a finished run is recorded in late_report only. Returns the run''s state.';
