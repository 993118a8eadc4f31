-- cronbox.fail_runs(run_ids, errors, retryable, p_now): fail_run for a batch in one call
-- (the relay: undeliverable messages, workers answering with failures). Set-based through
-- cronbox.finish_runs; each row says its verdict. errors is parallel to run_ids.
CREATE OR REPLACE FUNCTION cronbox.fail_runs(
    run_ids bigint[],
    errors text[],
    retryable boolean DEFAULT true,
    p_now timestamptz DEFAULT now()
) RETURNS TABLE (run_id bigint, state text, verdict text)
LANGUAGE sql
SET search_path = pg_catalog, pg_temp
SET jit = off  -- short OLTP statements: compiling costs more than running
AS $$
    SELECT f.run_id, f.state, f.verdict
    FROM cronbox.finish_runs(fail_runs.run_ids, 'failed', NULL, fail_runs.errors,
                             coalesce(fail_runs.retryable, true), p_now) f
$$;

COMMENT ON FUNCTION cronbox.fail_runs(bigint[], text[], boolean, timestamptz) IS
'Worker/relay: marks a batch of runs failed (errors parallel to run_ids), with retries and on_error as fail_run. Returns per run its state and verdict.';
