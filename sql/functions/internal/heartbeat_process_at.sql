-- Internal: the body of cronbox.heartbeat_process, with the time as its last parameter p_now. The public
-- cronbox.heartbeat_process passes now(); no cronbox role may execute this one (tests call it as the
-- owner or a superuser to fix the clock).
-- cronbox.heartbeat_process_at(process_id, p_now): a registered process says it is alive.
-- One-row update by primary key. Returns false when the entry is gone (pruned or
-- deregistered), so the caller registers again.
CREATE OR REPLACE FUNCTION cronbox.heartbeat_process_at(
    process_id bigint,
    p_now timestamptz DEFAULT now()
) RETURNS boolean
LANGUAGE sql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
    WITH seen AS (
        UPDATE cronbox.process p SET last_seen = p_now
        WHERE p.process_id = heartbeat_process_at.process_id
        RETURNING 1
    )
    SELECT EXISTS (SELECT 1 FROM seen)
$$;

COMMENT ON FUNCTION cronbox.heartbeat_process_at(bigint, timestamp with time zone) IS
'Internal (no cronbox role may execute it): the body of cronbox.heartbeat_process(bigint) with the time as p_now; tests use it to fix the clock. Processes: marks a registered process as seen now; returns false if it is no longer registered (register again).';

ALTER FUNCTION cronbox.heartbeat_process_at(bigint, timestamp with time zone) OWNER TO cronbox_owner;
REVOKE ALL ON FUNCTION cronbox.heartbeat_process_at(bigint, timestamp with time zone) FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
