-- cronbox.register_worker(name, host, pid, version, heartbeat_every, info): a worker of the
-- worker kit shows itself in cronbox.processes (kind 'worker') as pollers and relays do with
-- register_process. Upsert on name through register_process_at; a name held by a process of
-- another kind is refused (55000), so a worker role cannot take over a poller's or relay's entry.
-- Returns the process id for cronbox.heartbeat_worker / cronbox.deregister_worker.
CREATE OR REPLACE FUNCTION cronbox.register_worker(
    name text,
    host text,
    pid integer,
    version text,
    heartbeat_every interval DEFAULT '00:00:05'::interval,
    info jsonb DEFAULT '{}'::jsonb
) RETURNS bigint
LANGUAGE plpgsql VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_limit constant jsonb := '{"name": 200, "host": 255, "version": 100}';
    v_value text;
    v_field text;
BEGIN
    -- Each field on its own, so the message names the one that is wrong.
    FOREACH v_field IN ARRAY ARRAY['name', 'host', 'version'] LOOP
        v_value := CASE v_field WHEN 'name' THEN register_worker.name WHEN 'host' THEN register_worker.host
                                ELSE register_worker.version END;
        IF v_value IS NULL THEN
            RAISE EXCEPTION '%: must not be NULL', v_field USING ERRCODE = 'null_value_not_allowed';
        ELSIF length(v_value) > (v_limit ->> v_field)::integer THEN
            RAISE EXCEPTION '%: must be at most % characters', v_field, v_limit ->> v_field
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
    END LOOP;
    IF register_worker.pid IS NULL THEN
        RAISE EXCEPTION 'pid: must not be NULL' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    IF EXISTS (SELECT 1 FROM cronbox.process p WHERE p.name = register_worker.name AND p.kind <> 'worker') THEN
        RAISE EXCEPTION 'name: % is registered by a process that is not a worker', register_worker.name
            USING ERRCODE = 'object_not_in_prerequisite_state';
    END IF;
    RETURN cronbox.register_process_at('worker', register_worker.name, register_worker.host, register_worker.pid,
                                       register_worker.version, register_worker.heartbeat_every,
                                       register_worker.info, now());
END
$$;

COMMENT ON FUNCTION cronbox.register_worker(text, text, integer, text, interval, jsonb) IS
'Processes: a worker registers at start (kind worker, upsert on name; a name held by another kind of process: 55000); returns its process id. Bounds as register_process.';

ALTER FUNCTION cronbox.register_worker(text, text, integer, text, interval, jsonb) OWNER TO cronbox_owner;
REVOKE ALL ON FUNCTION cronbox.register_worker(text, text, integer, text, interval, jsonb) FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
GRANT EXECUTE ON FUNCTION cronbox.register_worker(text, text, integer, text, interval, jsonb) TO cronbox_worker;
