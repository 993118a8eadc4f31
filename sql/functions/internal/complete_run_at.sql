-- Internal: the body of cronbox.complete_run, with the time as its last parameter p_now. The public
-- cronbox.complete_run passes now(); no cronbox role may execute this one (tests call it as the
-- owner or a superuser to fix the clock).
-- cronbox.complete_run_at(run_id, result, p_now): a worker reports success.
-- Allowed from dispatched/delivered/running (cronbox.finish_runs does the work: job
-- bookkeeping, after-jobs, releases). A report for a run already final (lost and retried,
-- cancelled, a duplicate) is kept in late_report and changes nothing else; the run's state is
-- returned so the worker can tell. Raises P0002 for an unknown run, 55000 for a skipped/missed one.
CREATE OR REPLACE FUNCTION cronbox.complete_run_at(
    run_id bigint,
    result jsonb DEFAULT NULL,
    p_now timestamptz DEFAULT now()
) RETURNS text
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_state text;
    v_verdict text;
BEGIN
    IF complete_run_at.run_id IS NULL THEN
        RAISE EXCEPTION 'run_id: must not be NULL' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    IF octet_length(complete_run_at.result::text) > cronbox.max_result_bytes() THEN
        RAISE EXCEPTION 'result: must be at most % bytes as JSON text (cronbox.max_result_bytes), got %',
            cronbox.max_result_bytes(), octet_length(complete_run_at.result::text) USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF complete_run_at.result IS NOT NULL AND cronbox.json_too_deep(complete_run_at.result) THEN
        RAISE EXCEPTION 'result: must be nested at most 2048 levels deep (cronbox.json_too_deep)' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    -- the owner rule (cronbox.caller_hidden_runs: NULL for every worker, at once): another
    -- owner's run is an unknown run to a limited caller
    IF NOT cronbox.caller_writes_all() AND cronbox.caller_hidden_runs(ARRAY[complete_run_at.run_id]) <> '{}' THEN
        v_verdict := 'not_found';
    ELSE
        SELECT f.state, f.verdict INTO v_state, v_verdict
        FROM cronbox.finish_runs(ARRAY[complete_run_at.run_id], 'succeeded',
                                 ARRAY[complete_run_at.result], NULL, true, p_now) f;
    END IF;
    IF v_verdict = 'not_found' THEN
        RAISE EXCEPTION 'run_id: no run %', complete_run_at.run_id USING ERRCODE = 'no_data_found';
    ELSIF v_verdict = 'not_reportable' THEN
        RAISE EXCEPTION 'run_id: run % is %, it never ran', complete_run_at.run_id, v_state
            USING ERRCODE = 'object_not_in_prerequisite_state';
    END IF;
    RETURN v_state;
END
$$;

COMMENT ON FUNCTION cronbox.complete_run_at(bigint, jsonb, timestamp with time zone) IS
'Internal (no cronbox role may execute it): the body of cronbox.complete_run(bigint, jsonb) with the time as p_now; tests use it to fix the clock. Worker: marks a run succeeded with an optional result. A late report for a run already final (e.g. lost and retried) is recorded in late_report and never overwrites it. Returns the run''s state.';

ALTER FUNCTION cronbox.complete_run_at(bigint, jsonb, timestamp with time zone) OWNER TO cronbox_runner;
REVOKE ALL ON FUNCTION cronbox.complete_run_at(bigint, jsonb, timestamp with time zone) FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
