-- Internal: the body of cronbox.register_process, with the time as its last parameter p_now. The public
-- cronbox.register_process passes now(); no cronbox role may execute this one (tests call it as the
-- owner or a superuser to fix the clock).
-- cronbox.register_process_at(kind, name, host, pid, version, heartbeat_every, info, p_now):
-- a poller or relay announces itself at start (upsert on name, so a restarted process with
-- the same kind:host:pid replaces its old entry) and prunes entries not seen for a day.
-- Returns the process id for cronbox.heartbeat_process / cronbox.deregister_process.
CREATE OR REPLACE FUNCTION cronbox.register_process_at(
    kind text,
    name text,
    host text,
    pid integer,
    version text,
    heartbeat_every interval DEFAULT '5 seconds',
    info jsonb DEFAULT '{}',
    p_now timestamptz DEFAULT now()
) RETURNS bigint
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_id bigint;
BEGIN
    IF register_process_at.kind IS NULL OR register_process_at.kind !~ '^[a-z][a-z0-9_-]{0,30}$' THEN
        RAISE EXCEPTION 'kind: must be a short lowercase word like poller or relay, got %', register_process_at.kind
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF register_process_at.name IS NULL OR register_process_at.host IS NULL OR register_process_at.pid IS NULL
       OR register_process_at.version IS NULL THEN
        RAISE EXCEPTION 'name, host, pid, version: must not be NULL'
            USING ERRCODE = 'null_value_not_allowed';
    END IF;
    IF register_process_at.heartbeat_every IS NULL OR register_process_at.heartbeat_every <= interval '0'
       OR register_process_at.heartbeat_every > interval '1 hour' THEN
        RAISE EXCEPTION 'heartbeat_every: must be more than 0 and at most 1 hour, got %', register_process_at.heartbeat_every
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    -- Everything here is printed by `cronbox status` and the web console for a day: bounded.
    IF length(register_process_at.name) > 200 OR length(register_process_at.host) > 255
       OR length(register_process_at.version) > 100 THEN
        RAISE EXCEPTION 'name, host, version: must be at most 200, 255 and 100 characters'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF register_process_at.pid <= 0 THEN
        RAISE EXCEPTION 'pid: must be positive, got %', register_process_at.pid
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF register_process_at.info IS NOT NULL
       AND (jsonb_typeof(register_process_at.info) <> 'object' OR octet_length(register_process_at.info::text) > 65536
            OR cronbox.json_too_deep(register_process_at.info)) THEN
        RAISE EXCEPTION 'info: must be a JSON object of at most 64 kB, nested at most 2048 levels deep'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    DELETE FROM cronbox.process p WHERE p.last_seen < p_now - interval '1 day';
    INSERT INTO cronbox.process AS p (kind, name, host, pid, version, heartbeat_every, info, started_at, last_seen)
    VALUES (register_process_at.kind, register_process_at.name, register_process_at.host, register_process_at.pid,
            register_process_at.version, register_process_at.heartbeat_every, coalesce(register_process_at.info, '{}'),
            p_now, p_now)
    ON CONFLICT ON CONSTRAINT process_name_unique DO UPDATE SET
        kind = excluded.kind, host = excluded.host, pid = excluded.pid, version = excluded.version,
        heartbeat_every = excluded.heartbeat_every, info = excluded.info,
        started_at = excluded.started_at, last_seen = excluded.last_seen
    RETURNING p.process_id INTO v_id;
    RETURN v_id;
END
$$;

COMMENT ON FUNCTION cronbox.register_process_at(text, text, text, integer, text, interval, jsonb, timestamp with time zone) IS
'Internal (no cronbox role may execute it): the body of cronbox.register_process(text, text, text, integer, text, interval, jsonb) with the time as p_now; tests use it to fix the clock. Processes: a poller or relay registers at start (upsert on name); returns its process id. Entries not seen for a day are pruned.';

ALTER FUNCTION cronbox.register_process_at(text, text, text, integer, text, interval, jsonb, timestamp with time zone) OWNER TO cronbox_owner;
REVOKE ALL ON FUNCTION cronbox.register_process_at(text, text, text, integer, text, interval, jsonb, timestamp with time zone) FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
