-- cronbox.lock_job_named(name): the job's lock (cronbox.lock_job_id) for the job called name,
-- for the functions that change a job by name (schedule, pause, resume, unschedule). Taken
-- before any row lock on the job, as everyone does (no deadlock between the two kinds).
-- Returns the job_id, or NULL when no job has that name (nothing locked). If the name changed
-- hands while waiting (unscheduled, scheduled anew), the new job is locked instead.
CREATE OR REPLACE FUNCTION cronbox.lock_job_named(p_name text) RETURNS bigint
LANGUAGE plpgsql
SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_id bigint;
    v_now bigint;
BEGIN
    SELECT j.job_id INTO v_id FROM cronbox.job j WHERE j.name = p_name;
    LOOP
        IF v_id IS NULL THEN
            RETURN NULL;
        END IF;
        PERFORM cronbox.lock_job_id(v_id);
        -- a new statement: sees what committed while we waited
        SELECT j.job_id INTO v_now FROM cronbox.job j WHERE j.name = p_name;
        IF v_now IS NOT DISTINCT FROM v_id THEN
            RETURN v_id;
        END IF;
        v_id := v_now;
    END LOOP;
END
$$;

COMMENT ON FUNCTION cronbox.lock_job_named(text) IS
'Internal: takes the lock of the job named p_name (cronbox.lock_job_id), before any row lock on it; returns its job_id, NULL if there is no such job.';

ALTER FUNCTION cronbox.lock_job_named(text) OWNER TO cronbox_owner;
REVOKE ALL ON FUNCTION cronbox.lock_job_named(text) FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
