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
LANGUAGE sql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off  -- short OLTP statements: compiling costs more than running
AS $$
    SELECT f.run_id, f.state, f.verdict
    FROM cronbox.finish_runs(fail_runs_at.run_ids, 'failed', NULL, fail_runs_at.errors,
                             coalesce(fail_runs_at.retryable, true), p_now) f
$$;

COMMENT ON FUNCTION cronbox.fail_runs_at(bigint[], text[], boolean, timestamp with time zone) IS
'Internal (no cronbox role may execute it): the body of cronbox.fail_runs(bigint[], text[], boolean) with the time as p_now; tests use it to fix the clock. Worker/relay: marks a batch of runs failed (errors parallel to run_ids), with retries and on_error as fail_run. Returns per run its state and verdict.';

ALTER FUNCTION cronbox.fail_runs_at(bigint[], text[], boolean, timestamp with time zone) OWNER TO cronbox_owner;
REVOKE ALL ON FUNCTION cronbox.fail_runs_at(bigint[], text[], boolean, timestamp with time zone) FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
