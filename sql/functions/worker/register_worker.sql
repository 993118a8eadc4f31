-- cronbox.register_worker(name, host, pid, version, heartbeat_every, info): a worker of the
-- worker kit shows itself in cronbox.processes (kind 'worker') as pollers and relays do with
-- register_process. Upsert on name through register_process_at; a name held by a process of
-- another kind is refused (55000), so a worker role cannot take over a poller's or relay's entry.
-- Returns the process id for cronbox.heartbeat_worker / cronbox.deregister_worker.
-- Thin wrapper: the body is cronbox.register_own_process (internal/register_own_process.sql).
CREATE OR REPLACE FUNCTION cronbox.register_worker(
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
    SELECT cronbox.register_own_process('worker', $1, $2, $3, $4, $5, $6)
$$;

COMMENT ON FUNCTION cronbox.register_worker(text, text, integer, text, interval, jsonb) IS
'Processes: a worker registers at start (kind worker, upsert on name; a name held by another kind of process: 55000); returns its process id. Bounds as register_process.';

ALTER FUNCTION cronbox.register_worker(text, text, integer, text, interval, jsonb) OWNER TO cronbox_owner;
REVOKE ALL ON FUNCTION cronbox.register_worker(text, text, integer, text, interval, jsonb) FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
GRANT EXECUTE ON FUNCTION cronbox.register_worker(text, text, integer, text, interval, jsonb) TO cronbox_worker;
