-- cronbox.try_lock_job_id(job_id): the job's lock (see cronbox.lock_job_id: its job_stat row,
-- FOR NO KEY UPDATE SKIP LOCKED) if nobody else holds it: true when taken (or already held by
-- this transaction), false at once otherwise. Early dispatch and saturation use it as SKIP
-- LOCKED: a job busy elsewhere waits for the next call. dispatch takes the same lock
-- set-based in its own statement.
CREATE OR REPLACE FUNCTION cronbox.try_lock_job_id(p_job_id bigint) RETURNS boolean
LANGUAGE sql VOLATILE
SECURITY INVOKER
AS $$
    SELECT EXISTS (SELECT FROM cronbox.job_stat s WHERE s.job_id = p_job_id
                   FOR NO KEY UPDATE OF s SKIP LOCKED)
$$;

COMMENT ON FUNCTION cronbox.try_lock_job_id(bigint) IS
'Internal: takes the job''s lock (cronbox.lock_job_id: its job_stat row) if it is free or already held by this transaction: true; false at once when another transaction holds it.';

ALTER FUNCTION cronbox.try_lock_job_id(bigint) OWNER TO cronbox_owner;
REVOKE ALL ON FUNCTION cronbox.try_lock_job_id(bigint) FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
