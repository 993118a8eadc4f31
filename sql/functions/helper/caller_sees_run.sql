-- cronbox.caller_sees_run(run_id): true when the run is visible to the caller (the run table's
-- own row security decides: SECURITY INVOKER). The outbox's read policy calls it for a caller
-- that does not read every row (migration 0193): PL/pgSQL, so the run table is opened only when
-- it is called, and then only the run's partition.
CREATE OR REPLACE FUNCTION cronbox.caller_sees_run(p_run_id bigint) RETURNS boolean
LANGUAGE plpgsql STABLE
SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    RETURN EXISTS (SELECT 1 FROM cronbox.run r WHERE r.run_id = p_run_id);
END
$$;

COMMENT ON FUNCTION cronbox.caller_sees_run(bigint) IS
'True when the run is visible to the caller (its row security). Used by the outbox''s read policy.';

ALTER FUNCTION cronbox.caller_sees_run(bigint) OWNER TO cronbox_owner;
REVOKE ALL ON FUNCTION cronbox.caller_sees_run(bigint) FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
GRANT EXECUTE ON FUNCTION cronbox.caller_sees_run(bigint) TO cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
