-- cronbox.deregister_process(process_id): a process leaving cleanly removes its entry.
-- One-row delete by primary key; idempotent. Returns whether an entry was removed.
CREATE OR REPLACE FUNCTION cronbox.deregister_process(
    process_id bigint
) RETURNS boolean
LANGUAGE sql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
    WITH gone AS (
        DELETE FROM cronbox.process p WHERE p.process_id = deregister_process.process_id
        RETURNING 1
    )
    SELECT EXISTS (SELECT 1 FROM gone)
$$;

COMMENT ON FUNCTION cronbox.deregister_process(bigint) IS
'Processes: removes a process entry at a clean exit. Idempotent; returns whether an entry was removed.';

ALTER FUNCTION cronbox.deregister_process(bigint) OWNER TO cronbox_owner;
REVOKE ALL ON FUNCTION cronbox.deregister_process(bigint) FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
GRANT EXECUTE ON FUNCTION cronbox.deregister_process(bigint) TO cronbox_process;
