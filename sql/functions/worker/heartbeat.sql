-- cronbox.heartbeat(run_id, worker): a worker says it is alive. Extends the lease to
-- now + the job's timeout and returns 'continue'; returns 'cancel' (lease untouched) when
-- cancellation was requested, or the run is no longer this worker's (lost, timed out,
-- superseded, finished, or started by another worker). Locks the run row only.
-- Raises P0002 for an unknown run.
-- A run of a queue the caller may not work (worker grants, docs/operations.md "Tenants") is
-- unknown to it: P0002 (cronbox.worker_run_ids).
-- Thin wrapper: the body is cronbox.heartbeat_at (internal/heartbeat_at.sql), called with now().
CREATE OR REPLACE FUNCTION cronbox.heartbeat(
    run_id bigint,
    worker text DEFAULT NULL::text
) RETURNS text
LANGUAGE sql VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off
AS $$
    SELECT cronbox.heartbeat_at((cronbox.worker_run_ids(ARRAY[$1], 'run_id'))[1], $2, now())
$$;

COMMENT ON FUNCTION cronbox.heartbeat(bigint, text) IS
'Worker: extends the run''s lease by the job''s timeout and returns ''continue''; returns ''cancel'' when cancellation was requested or the run is no longer this worker''s (lost, finished, superseded). Raises P0002 for an unknown run.';

ALTER FUNCTION cronbox.heartbeat(bigint, text) OWNER TO cronbox_runner;
REVOKE ALL ON FUNCTION cronbox.heartbeat(bigint, text) FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
GRANT EXECUTE ON FUNCTION cronbox.heartbeat(bigint, text) TO cronbox_worker;
