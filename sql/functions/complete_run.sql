-- cronbox.complete_run(run_id, result, p_now): a worker reports success.
-- Locks the run row; allowed from dispatched/delivered/running. A report for a run that is
-- already finished (lost and retried, cancelled, ...) is kept in late_report and changes
-- nothing else. Updates the job's bookkeeping (active runs, last success, failure streaks).
CREATE OR REPLACE FUNCTION cronbox.complete_run(
    run_id bigint,
    result jsonb DEFAULT NULL,
    p_now timestamptz DEFAULT now()
) RETURNS text
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_run cronbox.run;
BEGIN
    SELECT * INTO v_run FROM cronbox.run r WHERE r.run_id = complete_run.run_id FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'run_id: no run %', complete_run.run_id USING ERRCODE = 'no_data_found';
    END IF;
    IF v_run.state NOT IN ('dispatched', 'delivered', 'running') THEN
        UPDATE cronbox.run r SET late_report = jsonb_build_object(
            'report', 'succeeded', 'result', complete_run.result, 'at', p_now, 'state_then', v_run.state)
        WHERE r.run_id = v_run.run_id;
        RETURN v_run.state;
    END IF;
    UPDATE cronbox.run r SET
        state = 'succeeded', finished_at = p_now, result = complete_run.result, lease_until = NULL,
        started_at = coalesce(r.started_at, p_now)
    WHERE r.run_id = v_run.run_id;
    UPDATE cronbox.job j SET
        active_runs = greatest(j.active_runs - 1, 0),
        last_run_state = 'succeeded',
        last_success_at = p_now,
        consecutive_failures = 0,
        consecutive_crashes = 0
    WHERE j.job_id = v_run.job_id;
    RETURN 'succeeded';
END
$$;

COMMENT ON FUNCTION cronbox.complete_run(bigint, jsonb, timestamptz) IS
'Worker: marks a run succeeded with an optional result. A late report for a run already finished (e.g. lost and retried) is recorded in late_report and never overwrites it. Returns the run''s state.';
