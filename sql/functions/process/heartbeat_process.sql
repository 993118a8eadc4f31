-- cronbox.heartbeat_process(process_id): a registered process says it is alive.
-- One-row update by primary key. Returns false when the entry is gone (pruned or
-- deregistered), so the caller registers again.
-- Thin wrapper: the body is cronbox.heartbeat_process_at (internal/heartbeat_process_at.sql), called with now().
CREATE OR REPLACE FUNCTION cronbox.heartbeat_process(
    process_id bigint
) RETURNS boolean
LANGUAGE sql VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT cronbox.heartbeat_process_at($1, now())
$$;

COMMENT ON FUNCTION cronbox.heartbeat_process(bigint) IS
'Processes: marks a registered process as seen now; returns false if it is no longer registered (register again).';

ALTER FUNCTION cronbox.heartbeat_process(bigint) OWNER TO cronbox_owner;
REVOKE ALL ON FUNCTION cronbox.heartbeat_process(bigint) FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
GRANT EXECUTE ON FUNCTION cronbox.heartbeat_process(bigint) TO cronbox_process;
