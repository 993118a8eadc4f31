-- cronbox.register_process(kind, name, host, pid, version, heartbeat_every, info):
-- a poller or relay announces itself at start (upsert on name, so a restarted process with
-- the same kind:host:pid replaces its old entry) and prunes entries not seen for a day.
-- Returns the process id for cronbox.heartbeat_process / cronbox.deregister_process.
-- Thin wrapper: the body is cronbox.register_process_at (internal/register_process_at.sql), called with now().
CREATE OR REPLACE FUNCTION cronbox.register_process(
    kind text,
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
    SELECT cronbox.register_process_at($1, $2, $3, $4, $5, $6, $7, now())
$$;

COMMENT ON FUNCTION cronbox.register_process(text, text, text, integer, text, interval, jsonb) IS
'Processes: a poller or relay registers at start (upsert on name); returns its process id. Entries not seen for a day are pruned.';

ALTER FUNCTION cronbox.register_process(text, text, text, integer, text, interval, jsonb) OWNER TO cronbox_owner;
REVOKE ALL ON FUNCTION cronbox.register_process(text, text, text, integer, text, interval, jsonb) FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
GRANT EXECUTE ON FUNCTION cronbox.register_process(text, text, text, integer, text, interval, jsonb) TO cronbox_process;
