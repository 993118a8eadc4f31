-- cronbox.sync_schedule_names(): brings cronbox.job_name_search (the web console's name
-- search, migration 0151) in step with cronbox.job: adds the schedules created since the last
-- sync (a primary-key range from the newest id it holds, re-checking the last 10,000 ids so a
-- schedule whose transaction committed late is not skipped) and removes the unscheduled ones
-- (an anti-join of the two primary keys). The poller's maintenance calls it every minute; no
-- lock needed (idempotent: two pollers at once insert nothing twice). Returns rows changed.
CREATE OR REPLACE FUNCTION cronbox.sync_schedule_names() RETURNS integer
LANGUAGE plpgsql VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_added integer;
    v_removed integer;
BEGIN
    INSERT INTO cronbox.job_name_search (job_id, name)
    SELECT j.job_id, j.name FROM cronbox.job j
    WHERE j.job_id > coalesce((SELECT max(s.job_id) FROM cronbox.job_name_search s), 0) - 10000
    ON CONFLICT (job_id) DO NOTHING;
    GET DIAGNOSTICS v_added = ROW_COUNT;
    DELETE FROM cronbox.job_name_search s
    WHERE NOT EXISTS (SELECT 1 FROM cronbox.job j WHERE j.job_id = s.job_id);
    GET DIAGNOSTICS v_removed = ROW_COUNT;
    RETURN v_added + v_removed;
END
$$;

COMMENT ON FUNCTION cronbox.sync_schedule_names() IS
'Brings cronbox.job_name_search (the console''s trigram name search) in step with cronbox.job: adds new schedules, removes unscheduled ones. The poller''s maintenance calls it every minute. Returns rows changed.';

ALTER FUNCTION cronbox.sync_schedule_names() OWNER TO cronbox_owner;
REVOKE ALL ON FUNCTION cronbox.sync_schedule_names() FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
GRANT EXECUTE ON FUNCTION cronbox.sync_schedule_names() TO cronbox_process;
