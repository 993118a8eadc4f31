-- cronbox.register_console(name, host, pid, version, heartbeat_every, info): a web console
-- (`cronbox web`) shows itself in cronbox.processes (kind 'console'), as workers do with
-- register_worker. Upsert on name; a name held by a process of another kind is refused (55000),
-- so the console's role cannot take over a poller's, relay's or worker's entry.
-- Returns the process id for cronbox.heartbeat_console / cronbox.deregister_console.
-- Thin wrapper: the body is cronbox.register_own_process (internal/register_own_process.sql).
CREATE OR REPLACE FUNCTION cronbox.register_console(
    name text,
    host text,
    pid integer,
    version text,
    heartbeat_every interval DEFAULT '00:00:05'::interval,
    info jsonb DEFAULT '{}'::jsonb
) RETURNS bigint
LANGUAGE sql VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT cronbox.register_own_process('console', $1, $2, $3, $4, $5, $6)
$$;

COMMENT ON FUNCTION cronbox.register_console(text, text, integer, text, interval, jsonb) IS
'Processes: a web console registers at start (kind console, upsert on name; a name held by another kind of process: 55000); returns its process id. Bounds as register_process. Callable by cronbox_web only.';

ALTER FUNCTION cronbox.register_console(text, text, integer, text, interval, jsonb) OWNER TO cronbox_owner;
REVOKE ALL ON FUNCTION cronbox.register_console(text, text, integer, text, interval, jsonb) FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
GRANT EXECUTE ON FUNCTION cronbox.register_console(text, text, integer, text, interval, jsonb) TO cronbox_web;
