-- Internal: the body of cronbox.fail_run, with the time as its last parameter p_now. The public
-- cronbox.fail_run passes now(); no cronbox role may execute this one (tests call it as the
-- owner or a superuser to fix the clock).
-- cronbox.fail_run_at(run_id, error, retryable, p_now): a worker reports failure.
-- Allowed from dispatched/delivered/running (cronbox.finish_runs does the work): the run
-- becomes failed (cancelled if cancellation was requested), a retry is scheduled while
-- attempts remain (retryable => false skips them), then on_error applies. A late report is
-- kept in late_report only. Raises P0002 for an unknown run, 55000 for a skipped/missed one.
CREATE OR REPLACE FUNCTION cronbox.fail_run_at(
    run_id bigint,
    error text,
    retryable boolean DEFAULT true,
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
    IF fail_run_at.run_id IS NULL THEN
        RAISE EXCEPTION 'run_id: must not be NULL' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    IF fail_run_at.retryable IS NULL THEN
        RAISE EXCEPTION 'retryable: must be true or false' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    -- the owner rule (cronbox.caller_hidden_runs: NULL for every worker, at once): another
    -- owner's run is an unknown run to a limited caller
    IF NOT cronbox.caller_writes_all() AND cronbox.caller_hidden_runs(ARRAY[fail_run_at.run_id]) <> '{}' THEN
        v_verdict := 'not_found';
    ELSE
        SELECT f.state, f.verdict INTO v_state, v_verdict
        FROM cronbox.finish_runs(ARRAY[fail_run_at.run_id], 'failed', NULL,
                                 ARRAY[coalesce(fail_run_at.error, 'failed (no error text)')],
                                 fail_run_at.retryable, p_now) f;
    END IF;
    IF v_verdict = 'not_found' THEN
        RAISE EXCEPTION 'run_id: no run %', fail_run_at.run_id USING ERRCODE = 'no_data_found';
    ELSIF v_verdict = 'not_reportable' THEN
        RAISE EXCEPTION 'run_id: run % is %, it never ran', fail_run_at.run_id, v_state
            USING ERRCODE = 'object_not_in_prerequisite_state';
    END IF;
    RETURN v_state;
END
$$;

COMMENT ON FUNCTION cronbox.fail_run_at(bigint, text, boolean, timestamp with time zone) IS
'Internal (no cronbox role may execute it): the body of cronbox.fail_run(bigint, text, boolean) with the time as p_now; tests use it to fix the clock. Worker: marks a run failed with an error text; retried (as a new attempt) while attempts remain unless retryable => false, then the job''s on_error applies. A late report for a final run is recorded in late_report only. Returns the run''s state.';

ALTER FUNCTION cronbox.fail_run_at(bigint, text, boolean, timestamp with time zone) OWNER TO cronbox_runner;
REVOKE ALL ON FUNCTION cronbox.fail_run_at(bigint, text, boolean, timestamp with time zone) FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
