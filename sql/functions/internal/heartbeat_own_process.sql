-- cronbox.heartbeat_own_process(kind, process_id, info): the body of heartbeat_worker and
-- heartbeat_console. One-row update by primary key, of entries of that kind only; info, when a
-- JSON object of at most 64 kB, replaces the entry's info. Returns false when the entry is gone
-- (pruned or deregistered), so the process registers again.
CREATE OR REPLACE FUNCTION cronbox.heartbeat_own_process(
    p_kind text,
    p_process_id bigint,
    p_info jsonb
) RETURNS boolean
LANGUAGE sql VOLATILE
SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
    WITH seen AS (
        UPDATE cronbox.process p SET last_seen = now(),
               info = CASE WHEN jsonb_typeof(p_info) = 'object' AND octet_length(p_info::text) <= 65536
                             AND NOT cronbox.json_too_deep(p_info) THEN p_info ELSE p.info END
        WHERE p.process_id = p_process_id AND p.kind = p_kind
        RETURNING 1
    )
    SELECT EXISTS (SELECT 1 FROM seen)
$$;

COMMENT ON FUNCTION cronbox.heartbeat_own_process(text, bigint, jsonb) IS
'Internal: marks a registered process of the given kind as seen now (info, a JSON object of at most 64 kB, replaces its info); false if it is no longer registered.';

ALTER FUNCTION cronbox.heartbeat_own_process(text, bigint, jsonb) OWNER TO cronbox_owner;
REVOKE ALL ON FUNCTION cronbox.heartbeat_own_process(text, bigint, jsonb) FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
