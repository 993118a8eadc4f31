-- cronbox.forget_schedule_names(): the name-search rows (cronbox.job_name_search, migration
-- 0151) of the jobs a statement deleted, removed in that statement (a statement trigger over
-- the deleted rows, one probe of the side table's key per job), so that
-- cronbox.sync_schedule_names never walks every name to find the unscheduled ones. The trigger
-- is (re)created here with its function, so this file says everything about it.
CREATE OR REPLACE FUNCTION cronbox.forget_schedule_names() RETURNS trigger
LANGUAGE plpgsql
SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    DELETE FROM cronbox.job_name_search s
    WHERE s.job_id = ANY (ARRAY(SELECT g.job_id FROM gone g));
    RETURN NULL;
END
$$;

COMMENT ON FUNCTION cronbox.forget_schedule_names() IS
'Internal (trigger): removes the cronbox.job_name_search rows of the jobs deleted from cronbox.job.';

ALTER FUNCTION cronbox.forget_schedule_names() OWNER TO cronbox_owner;
REVOKE ALL ON FUNCTION cronbox.forget_schedule_names() FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;

CREATE OR REPLACE TRIGGER job_forget_names AFTER DELETE ON cronbox.job
    REFERENCING OLD TABLE AS gone
    FOR EACH STATEMENT EXECUTE FUNCTION cronbox.forget_schedule_names();
