-- cronbox.start_run(run_id, worker): optional; a worker says it started the run.
-- Locks the run row only; dispatched/delivered -> running, records the worker and renews the
-- lease (the job's timeout from now). Repeating it from the same worker returns the lease.
-- Raises P0002 for an unknown run, 55000 if the run is finished or asked to cancel.
-- A run of a queue the caller may not work (worker grants, docs/operations.md "Tenants") is
-- unknown to it: P0002 (cronbox.worker_run_ids).
-- Thin wrapper: the body is cronbox.start_run_at (internal/start_run_at.sql), called with now().
CREATE OR REPLACE FUNCTION cronbox.start_run(
    run_id bigint,
    worker text
) RETURNS timestamp with time zone
LANGUAGE sql VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off
AS $$
    SELECT cronbox.start_run_at((cronbox.worker_run_ids(ARRAY[$1], 'run_id'))[1], $2, now())
$$;

COMMENT ON FUNCTION cronbox.start_run(bigint, text) IS
'Worker (optional): marks a dispatched or delivered run running on worker and renews its lease (the job''s timeout); returns the deadline. Idempotent for the same worker; raises 55000 for a finished run or one asked to cancel.';

ALTER FUNCTION cronbox.start_run(bigint, text) OWNER TO cronbox_runner;
REVOKE ALL ON FUNCTION cronbox.start_run(bigint, text) FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
GRANT EXECUTE ON FUNCTION cronbox.start_run(bigint, text) TO cronbox_worker;
