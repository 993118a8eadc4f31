-- cronbox.next_due(): the earliest due time among ready (not held) futures, or NULL.
-- One probe of job_future_lane_idx per queue and priority in use (cronbox.ready_lanes, a loose
-- index scan that returns each pair's earliest due time), so it stays cheap however many
-- futures wait. No locks. The poller sleeps until this time.
CREATE OR REPLACE FUNCTION cronbox.next_due() RETURNS timestamptz
LANGUAGE sql STABLE
SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT min(l.due_at) FROM cronbox.ready_lanes(NULL) l
$$;

COMMENT ON FUNCTION cronbox.next_due() IS
'The earliest due time among ready (not held) futures, or NULL; the poller sleeps until then. One index probe per queue and priority in use.';

ALTER FUNCTION cronbox.next_due() OWNER TO cronbox_owner;
REVOKE ALL ON FUNCTION cronbox.next_due() FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
