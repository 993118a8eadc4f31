-- cronbox.fail_run(run_id, error, retryable): a worker reports failure.
-- Allowed from dispatched/delivered/running (cronbox.finish_runs does the work): the run
-- becomes failed (cancelled if cancellation was requested), a retry is scheduled while
-- attempts remain (retryable => false skips them), then on_error applies. A late report is
-- kept in late_report only. Raises P0002 for an unknown run, 55000 for a skipped/missed one.
-- A run of a queue the caller may not work (worker grants, docs/operations.md "Tenants") is
-- unknown to it: P0002 (cronbox.worker_run_ids).
-- Thin wrapper: the body is cronbox.fail_run_at (internal/fail_run_at.sql), called with now().
CREATE OR REPLACE FUNCTION cronbox.fail_run(
    run_id bigint,
    error text,
    retryable boolean DEFAULT true
) RETURNS text
LANGUAGE plpgsql VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_id bigint := fail_run.run_id;
BEGIN
    -- PL/pgSQL, not SQL: a SQL function's statement is parsed and planned again on every call
    -- a worker limited to queues (cronbox.worker_run_ids) only when some worker is: the
    -- default has none, and the check is then this one probe, not a call with its SET clause
    IF EXISTS (SELECT 1 FROM cronbox.queue_grant g WHERE g.kind = 'worker') THEN
        v_id := (cronbox.worker_run_ids(ARRAY[v_id], 'run_id'))[1];
    END IF;
    RETURN cronbox.fail_run_at(v_id, fail_run.error, fail_run.retryable, now());
END
$$;

COMMENT ON FUNCTION cronbox.fail_run(bigint, text, boolean) IS
'Worker: marks a run failed with an error text; retried (as a new attempt) while attempts remain unless retryable => false, then the job''s on_error applies. A late report for a final run is recorded in late_report only. Returns the run''s state.';

ALTER FUNCTION cronbox.fail_run(bigint, text, boolean) OWNER TO cronbox_runner;
REVOKE ALL ON FUNCTION cronbox.fail_run(bigint, text, boolean) FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
GRANT EXECUTE ON FUNCTION cronbox.fail_run(bigint, text, boolean) TO cronbox_worker;
