-- cronbox.caller_work_scoped(): true when the caller is a worker whose listings are limited to
-- the queues it may work (cronbox.worker_may_work): some worker grant exists, and the caller is
-- a cronbox_worker that is neither an operator nor a cronbox_reader. False at once (one probe)
-- while no worker grant exists. Used by the helpers that list schedules and runs. No locks.
CREATE OR REPLACE FUNCTION cronbox.caller_work_scoped() RETURNS boolean
LANGUAGE plpgsql STABLE
SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    RETURN EXISTS (SELECT 1 FROM cronbox.queue_grant g WHERE g.kind = 'worker')
           AND pg_catalog.pg_has_role(cronbox.caller(), 'cronbox_worker', 'USAGE')
           AND NOT pg_catalog.pg_has_role(cronbox.caller(), 'cronbox_reader', 'USAGE')
           AND NOT cronbox.caller_is_operator();
END
$$;

COMMENT ON FUNCTION cronbox.caller_work_scoped() IS
'Internal: true when the caller is a worker whose listings (search_schedules, unfinished_runs) show only the queues it may work.';

ALTER FUNCTION cronbox.caller_work_scoped() OWNER TO cronbox_owner;
REVOKE ALL ON FUNCTION cronbox.caller_work_scoped() FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
