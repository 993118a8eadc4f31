-- cronbox.next_due(): the earliest due time among ready (not held) futures, or NULL.
-- One probe of job_future_ready_idx per priority in use (a loose index scan), so it stays
-- cheap however many futures wait. No locks. The poller sleeps until this time.
CREATE OR REPLACE FUNCTION cronbox.next_due() RETURNS timestamptz
LANGUAGE sql STABLE
SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT min(first.due_at)
    FROM cronbox.ready_priorities() AS prio(p)
    CROSS JOIN LATERAL (
        SELECT f.due_at FROM cronbox.job_future f
        WHERE f.hold IS NULL AND f.priority = prio.p
        ORDER BY f.due_at LIMIT 1
    ) first
$$;

COMMENT ON FUNCTION cronbox.next_due() IS
'The earliest due time among ready (not held) futures, or NULL; the poller sleeps until then. One index probe per priority in use.';

ALTER FUNCTION cronbox.next_due() OWNER TO cronbox_owner;
REVOKE ALL ON FUNCTION cronbox.next_due() FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
