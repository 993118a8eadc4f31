-- cronbox.lock_job_named(name, bucket): the job's lock (cronbox.lock_job_id: its job_stat row)
-- for the job called name, looked up in its bucket (cronbox.job_bucket(name), which the caller
-- computes once and filters its own statements on: each statement one task on Citus), for the
-- functions that change a job by name (schedule, trigger, unschedule, add_dependency,
-- remove_dependency). Taken before any row lock on the job, as everyone does (no deadlock
-- between the two kinds). Returns the job_id, or NULL when no job has that name (nothing
-- locked). If the name changed hands while waiting (unscheduled, scheduled anew: the same
-- bucket, as the bucket follows the name), the new job is locked instead.
CREATE OR REPLACE FUNCTION cronbox.lock_job_named(p_name text, p_bucket integer) RETURNS bigint
LANGUAGE plpgsql
SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_id bigint;
    v_now bigint;
BEGIN
    SELECT j.job_id INTO v_id FROM cronbox.job j WHERE j.bucket = p_bucket AND j.name = p_name;
    LOOP
        IF v_id IS NULL THEN
            RETURN NULL;
        END IF;
        PERFORM cronbox.lock_job_id(v_id, p_bucket);
        -- a new statement: sees what committed while we waited
        SELECT j.job_id INTO v_now FROM cronbox.job j WHERE j.bucket = p_bucket AND j.name = p_name;
        IF v_now IS NOT DISTINCT FROM v_id THEN
            RETURN v_id;
        END IF;
        v_id := v_now;
    END LOOP;
END
$$;

COMMENT ON FUNCTION cronbox.lock_job_named(text, integer) IS
'Internal: takes the lock of the job named p_name in bucket p_bucket (cronbox.job_bucket(p_name); the lock of cronbox.lock_job_id), before any row lock on it; returns its job_id, NULL if there is no such job.';

ALTER FUNCTION cronbox.lock_job_named(text, integer) OWNER TO cronbox_owner;
REVOKE ALL ON FUNCTION cronbox.lock_job_named(text, integer) FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
