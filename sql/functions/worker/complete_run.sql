-- cronbox.complete_run(run_id, result): a worker reports success.
-- Allowed from dispatched/delivered/running (cronbox.finish_runs does the work: job
-- bookkeeping, after-jobs, releases). A report for a run already final (lost and retried,
-- cancelled, a duplicate) is kept in late_report and changes nothing else; the run's state is
-- returned so the worker can tell. Raises P0002 for an unknown run, 55000 for a skipped/missed one.
-- A run of a queue the caller may not work (worker grants, docs/operations.md "Tenants") is
-- unknown to it: P0002 (cronbox.worker_run_ids).
-- Thin wrapper: the body is cronbox.complete_run_at (internal/complete_run_at.sql), called with now().
CREATE OR REPLACE FUNCTION cronbox.complete_run(
    run_id bigint,
    result jsonb DEFAULT NULL::jsonb
) RETURNS text
LANGUAGE plpgsql VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_id bigint := complete_run.run_id;
BEGIN
    -- PL/pgSQL, not SQL: a SQL function's statement is parsed and planned again on every call
    -- a worker limited to queues (cronbox.worker_run_ids) only when some worker is: the
    -- default has none, and the check is then this one probe, not a call with its SET clause
    IF EXISTS (SELECT 1 FROM cronbox.queue_grant g WHERE g.kind = 'worker') THEN
        v_id := (cronbox.worker_run_ids(ARRAY[v_id], 'run_id'))[1];
    END IF;
    RETURN cronbox.complete_run_at(v_id, complete_run.result, now());
END
$$;

COMMENT ON FUNCTION cronbox.complete_run(bigint, jsonb) IS
'Worker: marks a run succeeded with an optional result. A late report for a run already final (e.g. lost and retried) is recorded in late_report and never overwrites it. Returns the run''s state.';

ALTER FUNCTION cronbox.complete_run(bigint, jsonb) OWNER TO cronbox_runner;
REVOKE ALL ON FUNCTION cronbox.complete_run(bigint, jsonb) FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
GRANT EXECUTE ON FUNCTION cronbox.complete_run(bigint, jsonb) TO cronbox_worker;
