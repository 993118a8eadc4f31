-- cronbox.heartbeat_console(process_id, info): a registered web console says it is alive (and
-- refreshes its info when given). One-row update by primary key, of console entries only.
-- Returns false when the entry is gone (pruned or deregistered), so the console registers again.
-- Thin wrapper: the body is cronbox.heartbeat_own_process (internal/heartbeat_own_process.sql).
CREATE OR REPLACE FUNCTION cronbox.heartbeat_console(
    process_id bigint,
    info jsonb DEFAULT NULL
) RETURNS boolean
LANGUAGE sql VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT cronbox.heartbeat_own_process('console', $1, $2)
$$;

COMMENT ON FUNCTION cronbox.heartbeat_console(bigint, jsonb) IS
'Processes: marks a registered web console as seen now (info, a JSON object of at most 64 kB, replaces its info); returns false if it is no longer registered (register again). Callable by cronbox_web only.';

ALTER FUNCTION cronbox.heartbeat_console(bigint, jsonb) OWNER TO cronbox_owner;
REVOKE ALL ON FUNCTION cronbox.heartbeat_console(bigint, jsonb) FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
GRANT EXECUTE ON FUNCTION cronbox.heartbeat_console(bigint, jsonb) TO cronbox_web;
