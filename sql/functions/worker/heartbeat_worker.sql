-- cronbox.heartbeat_worker(process_id, info): a registered worker says it is alive (and
-- refreshes its info when given). One-row update by primary key, of worker entries only.
-- Returns false when the entry is gone (pruned or deregistered), so the worker registers again.
-- Thin wrapper: the body is cronbox.heartbeat_own_process (internal/heartbeat_own_process.sql).
CREATE OR REPLACE FUNCTION cronbox.heartbeat_worker(
    process_id bigint,
    info jsonb DEFAULT NULL
) RETURNS boolean
LANGUAGE sql VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT cronbox.heartbeat_own_process('worker', $1, $2)
$$;

COMMENT ON FUNCTION cronbox.heartbeat_worker(bigint, jsonb) IS
'Processes: marks a registered worker as seen now (info, a JSON object of at most 64 kB, replaces its info); returns false if it is no longer registered (register again).';

ALTER FUNCTION cronbox.heartbeat_worker(bigint, jsonb) OWNER TO cronbox_owner;
REVOKE ALL ON FUNCTION cronbox.heartbeat_worker(bigint, jsonb) FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
GRANT EXECUTE ON FUNCTION cronbox.heartbeat_worker(bigint, jsonb) TO cronbox_worker;
