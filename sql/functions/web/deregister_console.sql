-- cronbox.deregister_console(process_id): a web console's entry removed at its clean exit
-- (console entries only). Idempotent; returns whether an entry was removed.
-- Thin wrapper: the body is cronbox.deregister_own_process (internal/deregister_own_process.sql).
CREATE OR REPLACE FUNCTION cronbox.deregister_console(
    process_id bigint
) RETURNS boolean
LANGUAGE sql VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT cronbox.deregister_own_process('console', $1)
$$;

COMMENT ON FUNCTION cronbox.deregister_console(bigint) IS
'Processes: removes a web console''s entry at its clean exit. Idempotent; returns whether an entry was removed. Callable by cronbox_web only.';

ALTER FUNCTION cronbox.deregister_console(bigint) OWNER TO cronbox_owner;
REVOKE ALL ON FUNCTION cronbox.deregister_console(bigint) FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
GRANT EXECUTE ON FUNCTION cronbox.deregister_console(bigint) TO cronbox_web;
