-- cronbox.deregister_worker(process_id): a worker's entry removed at its clean exit (worker
-- entries only). Idempotent; returns whether an entry was removed.
-- Thin wrapper: the body is cronbox.deregister_own_process (internal/deregister_own_process.sql).
CREATE OR REPLACE FUNCTION cronbox.deregister_worker(
    process_id bigint
) RETURNS boolean
LANGUAGE sql VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT cronbox.deregister_own_process('worker', $1)
$$;

COMMENT ON FUNCTION cronbox.deregister_worker(bigint) IS
'Processes: removes a worker''s entry at its clean exit. Idempotent; returns whether an entry was removed.';

ALTER FUNCTION cronbox.deregister_worker(bigint) OWNER TO cronbox_owner;
REVOKE ALL ON FUNCTION cronbox.deregister_worker(bigint) FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
GRANT EXECUTE ON FUNCTION cronbox.deregister_worker(bigint) TO cronbox_worker;
