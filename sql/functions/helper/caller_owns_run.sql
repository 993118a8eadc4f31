-- cronbox.caller_owns_run(run_id): true when the caller owns the job of the run. The outbox's
-- update and delete policies call it for a caller limited to its own schedules (migration
-- 0193): PL/pgSQL, so the run table is opened only when it is called, and then only the run's
-- partition.
CREATE OR REPLACE FUNCTION cronbox.caller_owns_run(p_run_id bigint) RETURNS boolean
LANGUAGE plpgsql STABLE
SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    RETURN EXISTS (SELECT 1 FROM cronbox.run r JOIN cronbox.job j ON j.job_id = r.job_id
                   WHERE r.run_id = p_run_id AND j.owner = cronbox.caller());
END
$$;

COMMENT ON FUNCTION cronbox.caller_owns_run(bigint) IS
'True when the caller owns the job of the run. Used by the outbox''s update and delete policies.';

ALTER FUNCTION cronbox.caller_owns_run(bigint) OWNER TO cronbox_owner;
REVOKE ALL ON FUNCTION cronbox.caller_owns_run(bigint) FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
GRANT EXECUTE ON FUNCTION cronbox.caller_owns_run(bigint) TO cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
