-- Internal: the body of cronbox.start_run, with the time as its last parameter p_now. The public
-- cronbox.start_run passes now(); no cronbox role may execute this one (tests call it as the
-- owner or a superuser to fix the clock).
-- cronbox.start_run_at(run_id, worker, p_now): optional; a worker says it started the run.
-- Locks the run's outbox row only (the run in flight); dispatched/delivered -> running, records the worker and renews the
-- lease (the job's timeout from now). Repeating it from the same worker returns the lease.
-- Raises P0002 for an unknown run, 55000 if the run is finished or asked to cancel.
-- The work is cronbox.start_run_try's (internal/start_run_try.sql), whose refusal this raises.
CREATE OR REPLACE FUNCTION cronbox.start_run_at(
    run_id bigint,
    worker text,
    p_now timestamptz DEFAULT now()
) RETURNS timestamptz
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off  -- short OLTP statements: compiling costs more than running
AS $$
DECLARE
    v_try record;
BEGIN
    IF start_run_at.run_id IS NULL THEN
        RAISE EXCEPTION 'run_id: must not be NULL' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    PERFORM cronbox.assert_worker(start_run_at.worker);
    IF start_run_at.worker IS NULL OR start_run_at.worker = '' THEN
        RAISE EXCEPTION 'worker: must name the worker' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    v_try := cronbox.start_run_try(start_run_at.run_id, start_run_at.worker, p_now);
    IF v_try.code IS NOT NULL THEN
        RAISE EXCEPTION USING ERRCODE = v_try.code, MESSAGE = v_try.error;
    END IF;
    RETURN v_try.deadline;
END
$$;

COMMENT ON FUNCTION cronbox.start_run_at(bigint, text, timestamp with time zone) IS
'Internal (no cronbox role may execute it): the body of cronbox.start_run(bigint, text) with the time as p_now; tests use it to fix the clock. Worker (optional): marks a dispatched or delivered run running on worker and renews its lease (the job''s timeout); returns the deadline. Idempotent for the same worker; raises 55000 for a finished run or one asked to cancel.';

ALTER FUNCTION cronbox.start_run_at(bigint, text, timestamp with time zone) OWNER TO cronbox_runner;
REVOKE ALL ON FUNCTION cronbox.start_run_at(bigint, text, timestamp with time zone) FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
