-- cronbox.heartbeat_process(process_id, p_now): a registered process says it is alive.
-- One-row update by primary key. Returns false when the entry is gone (pruned or
-- deregistered), so the caller registers again.
CREATE OR REPLACE FUNCTION cronbox.heartbeat_process(
    process_id bigint,
    p_now timestamptz DEFAULT now()
) RETURNS boolean
LANGUAGE sql
SET search_path = pg_catalog, pg_temp
AS $$
    WITH seen AS (
        UPDATE cronbox.process p SET last_seen = p_now
        WHERE p.process_id = heartbeat_process.process_id
        RETURNING 1
    )
    SELECT EXISTS (SELECT 1 FROM seen)
$$;

COMMENT ON FUNCTION cronbox.heartbeat_process(bigint, timestamptz) IS
'Processes: marks a registered process as seen now; returns false if it is no longer registered (register again).';
