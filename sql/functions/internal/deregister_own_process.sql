-- cronbox.deregister_own_process(kind, process_id): the body of deregister_worker and
-- deregister_console: removes the entry if it is of that kind. Idempotent; returns whether an
-- entry was removed.
CREATE OR REPLACE FUNCTION cronbox.deregister_own_process(
    p_kind text,
    p_process_id bigint
) RETURNS boolean
LANGUAGE sql VOLATILE
SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
    WITH gone AS (
        DELETE FROM cronbox.process p WHERE p.process_id = p_process_id AND p.kind = p_kind
        RETURNING 1
    )
    SELECT EXISTS (SELECT 1 FROM gone)
$$;

COMMENT ON FUNCTION cronbox.deregister_own_process(text, bigint) IS
'Internal: removes a process entry of the given kind at its clean exit. Idempotent; returns whether an entry was removed.';

ALTER FUNCTION cronbox.deregister_own_process(text, bigint) OWNER TO cronbox_owner;
REVOKE ALL ON FUNCTION cronbox.deregister_own_process(text, bigint) FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
