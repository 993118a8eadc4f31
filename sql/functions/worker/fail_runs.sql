-- cronbox.fail_runs(run_ids, errors, retryable): fail_run for a batch in one call
-- (the relay: undeliverable messages, workers answering with failures). Set-based through
-- cronbox.finish_runs; each row says its verdict. errors is parallel to run_ids.
-- A run of a queue the caller may not work (worker grants, docs/operations.md "Tenants") is
-- unknown to it: P0002 (cronbox.worker_run_ids).
-- Thin wrapper: the body is cronbox.fail_runs_at (internal/fail_runs_at.sql), called with now().
CREATE OR REPLACE FUNCTION cronbox.fail_runs(
    run_ids bigint[],
    errors text[],
    retryable boolean DEFAULT true
) RETURNS TABLE(run_id bigint, state text, verdict text)
LANGUAGE sql VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off
AS $$
    SELECT * FROM cronbox.fail_runs_at(cronbox.worker_run_ids($1, 'run_ids'), $2, $3, now())
$$;

COMMENT ON FUNCTION cronbox.fail_runs(bigint[], text[], boolean) IS
'Worker/relay: marks a batch of runs failed (errors parallel to run_ids), with retries and on_error as fail_run. Returns per run its state and verdict.';

ALTER FUNCTION cronbox.fail_runs(bigint[], text[], boolean) OWNER TO cronbox_runner;
REVOKE ALL ON FUNCTION cronbox.fail_runs(bigint[], text[], boolean) FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
GRANT EXECUTE ON FUNCTION cronbox.fail_runs(bigint[], text[], boolean) TO cronbox_worker;
