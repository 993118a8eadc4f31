-- cronbox.add_job_stat(): the statistics row of each new job (cronbox.job_stat, migration
-- 0122), created in the statement that inserts the jobs, set-based (a statement trigger over
-- the inserted rows), whoever inserts them: cronbox.schedule, or a bulk INSERT ... SELECT.
-- Idempotent (ON CONFLICT DO NOTHING). The trigger is (re)created here with its function, so
-- this file says everything about it.
CREATE OR REPLACE FUNCTION cronbox.add_job_stat() RETURNS trigger
LANGUAGE plpgsql
SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    INSERT INTO cronbox.job_stat (job_id, bucket)
    SELECT a.job_id, a.bucket FROM added a
    ON CONFLICT (job_id) DO NOTHING;
    RETURN NULL;
END
$$;

COMMENT ON FUNCTION cronbox.add_job_stat() IS
'Internal (trigger): creates the cronbox.job_stat row of each job inserted into cronbox.job.';

ALTER FUNCTION cronbox.add_job_stat() OWNER TO cronbox_owner;
REVOKE ALL ON FUNCTION cronbox.add_job_stat() FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;

CREATE OR REPLACE TRIGGER job_add_stat AFTER INSERT ON cronbox.job
    REFERENCING NEW TABLE AS added
    FOR EACH STATEMENT EXECUTE FUNCTION cronbox.add_job_stat();
