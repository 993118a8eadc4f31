-- Internal: the body of cronbox.fail_runs, with the time as its last parameter p_now. The public
-- cronbox.fail_runs passes now(); no cronbox role may execute this one (tests call it as the
-- owner or a superuser to fix the clock).
-- cronbox.fail_runs_at(run_ids, errors, retryable, p_now): fail_run for a batch in one call
-- (the relay: undeliverable messages, workers answering with failures). Set-based through
-- cronbox.finish_runs; each row says its verdict. errors is parallel to run_ids.
CREATE OR REPLACE FUNCTION cronbox.fail_runs_at(
    run_ids bigint[],
    errors text[],
    retryable boolean DEFAULT true,
    p_now timestamptz DEFAULT now()
) RETURNS TABLE (run_id bigint, state text, verdict text)
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off  -- short OLTP statements: compiling costs more than running
AS $$
BEGIN
    -- run_ids checked; errors, when given, has one element per run id
    PERFORM cronbox.assert_run_ids(fail_runs_at.run_ids, CASE WHEN fail_runs_at.errors IS NOT NULL THEN 'errors' END,
                                   array_length(fail_runs_at.errors, 1));
    IF fail_runs_at.errors IS NULL THEN
        RAISE EXCEPTION 'errors: must not be NULL (one error text per run_id)' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    IF array_position(fail_runs_at.errors, NULL) IS NOT NULL THEN
        RAISE EXCEPTION 'errors: must not contain NULL' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    IF fail_runs_at.retryable IS NULL THEN
        RAISE EXCEPTION 'retryable: must be true or false' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    RETURN QUERY
    SELECT f.run_id, f.state, f.verdict
    FROM cronbox.finish_visible_runs(fail_runs_at.run_ids, 'failed', NULL, fail_runs_at.errors,
                             fail_runs_at.retryable, p_now) f;
END
$$;

COMMENT ON FUNCTION cronbox.fail_runs_at(bigint[], text[], boolean, timestamp with time zone) IS
'Internal (no cronbox role may execute it): the body of cronbox.fail_runs(bigint[], text[], boolean) with the time as p_now; tests use it to fix the clock. Worker/relay: marks a batch of runs failed (errors parallel to run_ids), with retries and on_error as fail_run. Returns per run its state and verdict.';

ALTER FUNCTION cronbox.fail_runs_at(bigint[], text[], boolean, timestamp with time zone) OWNER TO cronbox_runner;
REVOKE ALL ON FUNCTION cronbox.fail_runs_at(bigint[], text[], boolean, timestamp with time zone) FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
