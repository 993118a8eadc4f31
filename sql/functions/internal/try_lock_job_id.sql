-- cronbox.try_lock_job_id(job_id): the job's lock (see cronbox.lock_job_id) if nobody else
-- holds it: true when taken (or already held by this transaction), false at once otherwise.
-- Dispatch and saturation use it as SKIP LOCKED: a job busy elsewhere waits for the next call.
-- LANGUAGE sql without SET clauses, so it is inlined into its caller.
CREATE OR REPLACE FUNCTION cronbox.try_lock_job_id(p_job_id bigint) RETURNS boolean
LANGUAGE sql VOLATILE
SECURITY INVOKER
AS $$
    SELECT pg_catalog.pg_try_advisory_xact_lock(1668444014 # (p_job_id >> 32)::integer,
                                                ((p_job_id & 4294967295) - 2147483648)::integer)
$$;

COMMENT ON FUNCTION cronbox.try_lock_job_id(bigint) IS
'Internal: takes the job''s lock (cronbox.lock_job_id) if it is free or already held by this transaction: true; false at once when another transaction holds it.';

ALTER FUNCTION cronbox.try_lock_job_id(bigint) OWNER TO cronbox_owner;
REVOKE ALL ON FUNCTION cronbox.try_lock_job_id(bigint) FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
