-- cronbox.sync_schedule_names(p_batch): brings cronbox.job_name_search (the web console's name
-- search, migration 0151) in step with cronbox.job, a bounded step at a time: adds at most
-- p_batch of the schedules created since the last sync (a primary-key range from the newest
-- id it holds, in id order), after re-checking the 10,000 ids below that one, so a schedule
-- whose transaction committed late is not skipped. Unscheduled jobs' names are removed when the
-- jobs are deleted (by cronbox.unschedule), not by a walk of every name: a
-- million schedules cost a sync no more than a thousand. A name written by a sync while its
-- job was being deleted can outlive it; the search's callers drop names without a schedule.
-- The poller's maintenance calls it every minute, again while it returns p_batch; no lock
-- needed (idempotent: two pollers at once insert nothing twice). Returns names added.
CREATE OR REPLACE FUNCTION cronbox.sync_schedule_names(p_batch integer DEFAULT 10000) RETURNS integer
LANGUAGE plpgsql VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_batch integer := cronbox.checked_limit('p_batch', p_batch, 1000000);
    v_synced bigint := coalesce((SELECT max(s.job_id) FROM cronbox.job_name_search s), 0);
    v_added integer;
BEGIN
    -- the last 10,000 ids again (a transaction that drew its id earlier may commit later)
    INSERT INTO cronbox.job_name_search (job_id, name)
    SELECT j.job_id, j.name FROM cronbox.job j
    WHERE j.job_id > v_synced - 10000 AND j.job_id <= v_synced
    ON CONFLICT (job_id) DO NOTHING;
    -- then the next p_batch, in id order
    INSERT INTO cronbox.job_name_search (job_id, name)
    SELECT j.job_id, j.name FROM cronbox.job j
    WHERE j.job_id > v_synced
    ORDER BY j.job_id
    LIMIT v_batch
    ON CONFLICT (job_id) DO NOTHING;
    GET DIAGNOSTICS v_added = ROW_COUNT;
    RETURN v_added;
END
$$;

COMMENT ON FUNCTION cronbox.sync_schedule_names(integer) IS
'Brings cronbox.job_name_search (the console''s trigram name search) in step with cronbox.job: adds at most p_batch (1..1000000) new schedules per call (unscheduled ones are removed as they are deleted). The poller''s maintenance calls it every minute, again while it returns p_batch. Returns names added.';

ALTER FUNCTION cronbox.sync_schedule_names(integer) OWNER TO cronbox_owner;
REVOKE ALL ON FUNCTION cronbox.sync_schedule_names(integer) FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
GRANT EXECUTE ON FUNCTION cronbox.sync_schedule_names(integer) TO cronbox_process;
