-- cronbox.heartbeat_worker(process_id, info): a registered worker says it is alive (and
-- refreshes its info when given). One-row update by primary key, of worker entries only.
-- Returns false when the entry is gone (pruned or deregistered), so the worker registers again.
CREATE OR REPLACE FUNCTION cronbox.heartbeat_worker(
    process_id bigint,
    info jsonb DEFAULT NULL
) RETURNS boolean
LANGUAGE sql VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
    WITH seen AS (
        UPDATE cronbox.process p SET last_seen = now(),
               info = CASE WHEN jsonb_typeof($2) = 'object' AND octet_length($2::text) <= 65536 THEN $2 ELSE p.info END
        WHERE p.process_id = $1 AND p.kind = 'worker'
        RETURNING 1
    )
    SELECT EXISTS (SELECT 1 FROM seen)
$$;

COMMENT ON FUNCTION cronbox.heartbeat_worker(bigint, jsonb) IS
'Processes: marks a registered worker as seen now (info, a JSON object of at most 64 kB, replaces its info); returns false if it is no longer registered (register again).';

ALTER FUNCTION cronbox.heartbeat_worker(bigint, jsonb) OWNER TO cronbox_owner;
REVOKE ALL ON FUNCTION cronbox.heartbeat_worker(bigint, jsonb) FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
GRANT EXECUTE ON FUNCTION cronbox.heartbeat_worker(bigint, jsonb) TO cronbox_worker;
