-- cronbox.register_own_process(kind, name, host, pid, version, heartbeat_every, info): the body
-- of register_worker and register_console, roles that may register entries of one kind only.
-- Checks each field on its own (the message names the one that is wrong), refuses a name held
-- by a process of another kind (55000: a worker or console role cannot take over a poller's or
-- relay's entry), then upserts on name through register_process_at with now().
CREATE OR REPLACE FUNCTION cronbox.register_own_process(
    p_kind text,
    p_name text,
    p_host text,
    p_pid integer,
    p_version text,
    p_heartbeat_every interval,
    p_info jsonb
) RETURNS bigint
LANGUAGE plpgsql VOLATILE
SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_limit constant jsonb := '{"name": 200, "host": 255, "version": 100}';
    v_value text;
    v_field text;
BEGIN
    FOREACH v_field IN ARRAY ARRAY['name', 'host', 'version'] LOOP
        v_value := CASE v_field WHEN 'name' THEN p_name WHEN 'host' THEN p_host ELSE p_version END;
        IF v_value IS NULL THEN
            RAISE EXCEPTION '%: must not be NULL', v_field USING ERRCODE = 'null_value_not_allowed';
        ELSIF length(v_value) > (v_limit ->> v_field)::integer THEN
            RAISE EXCEPTION '%: must be at most % characters', v_field, v_limit ->> v_field
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
    END LOOP;
    IF p_pid IS NULL THEN
        RAISE EXCEPTION 'pid: must not be NULL' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    IF EXISTS (SELECT 1 FROM cronbox.process p WHERE p.name = p_name AND p.kind <> p_kind) THEN
        RAISE EXCEPTION 'name: % is registered by a process that is not a %', p_name, p_kind
            USING ERRCODE = 'object_not_in_prerequisite_state';
    END IF;
    RETURN cronbox.register_process_at(p_kind, p_name, p_host, p_pid, p_version, p_heartbeat_every, p_info, now());
END
$$;

COMMENT ON FUNCTION cronbox.register_own_process(text, text, text, integer, text, interval, jsonb) IS
'Internal: registers a process of one kind (register_worker, register_console): fields checked one by one, a name held by another kind refused (55000), upsert through register_process_at. Returns the process id.';

ALTER FUNCTION cronbox.register_own_process(text, text, text, integer, text, interval, jsonb) OWNER TO cronbox_owner;
REVOKE ALL ON FUNCTION cronbox.register_own_process(text, text, text, integer, text, interval, jsonb) FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
