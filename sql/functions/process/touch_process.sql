-- cronbox.touch_process(p_process_id, p_info): a registered process says it is alive and
-- what it wants shown in cronbox.processes.info (the relay: its routes and the state of its
-- circuit breakers, read by `cronbox status`). One-row update by primary key. Returns false
-- when the entry is gone (pruned or deregistered), so the caller registers again.
CREATE OR REPLACE FUNCTION cronbox.touch_process(
    p_process_id bigint,
    p_info jsonb
) RETURNS boolean
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF p_info IS NULL THEN
        RAISE EXCEPTION 'p_info: must not be NULL' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    IF jsonb_typeof(p_info) <> 'object' OR octet_length(p_info::text) > 65536 OR cronbox.json_too_deep(p_info) THEN
        RAISE EXCEPTION 'p_info: must be a JSON object of at most 64 kB, nested at most 2048 levels deep'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    UPDATE cronbox.process p SET last_seen = now(), info = p_info
    WHERE p.process_id = p_process_id;
    RETURN FOUND;
END
$$;

COMMENT ON FUNCTION cronbox.touch_process(bigint, jsonb) IS
'Processes: marks a registered process as seen now and replaces its info (a JSON object, at most 64 kB); returns false if it is no longer registered (register again).';

ALTER FUNCTION cronbox.touch_process(bigint, jsonb) OWNER TO cronbox_owner;
REVOKE ALL ON FUNCTION cronbox.touch_process(bigint, jsonb) FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
GRANT EXECUTE ON FUNCTION cronbox.touch_process(bigint, jsonb) TO cronbox_process;
