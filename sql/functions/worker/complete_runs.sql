-- cronbox.complete_runs(run_ids, results): complete_run for a batch in one call
-- (the relay, when a worker answers with outcomes, and fast workers). Set-based through
-- cronbox.finish_runs; never raises for one bad id: each row says its verdict (finished,
-- late, not_reportable, not_found). results, when given, is parallel to run_ids.
-- A run of a queue the caller may not work (worker grants, docs/operations.md "Tenants") is
-- unknown to it: P0002 (cronbox.worker_run_ids).
-- Thin wrapper: the body is cronbox.complete_runs_at (internal/complete_runs_at.sql), called with now().
CREATE OR REPLACE FUNCTION cronbox.complete_runs(
    run_ids bigint[],
    results jsonb[] DEFAULT NULL::jsonb[]
) RETURNS TABLE(run_id bigint, state text, verdict text)
LANGUAGE sql VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off
AS $$
    SELECT * FROM cronbox.complete_runs_at(cronbox.worker_run_ids($1, 'run_ids'), $2, now())
$$;

COMMENT ON FUNCTION cronbox.complete_runs(bigint[], jsonb[]) IS
'Worker/relay: marks a batch of runs succeeded (results parallel to run_ids) in one set-based call. Returns per run its state and verdict (finished, late, not_reportable, not_found).';

ALTER FUNCTION cronbox.complete_runs(bigint[], jsonb[]) OWNER TO cronbox_runner;
REVOKE ALL ON FUNCTION cronbox.complete_runs(bigint[], jsonb[]) FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
GRANT EXECUTE ON FUNCTION cronbox.complete_runs(bigint[], jsonb[]) TO cronbox_worker;
