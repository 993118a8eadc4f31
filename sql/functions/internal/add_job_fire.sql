-- cronbox.add_job_fire(): the saturation-state row of each new job (cronbox.job_fire, migration
-- 0331), created in the statement that inserts the jobs, set-based (a statement trigger over
-- the inserted rows), whoever inserts them: cronbox.schedule (which then writes the job's
-- frontier and next fire into it), or a bulk INSERT ... SELECT. A new row has nothing to
-- materialise (next_fire NULL) until its frontier and next fire are written; it copies the
-- job's paused flag. Idempotent (ON CONFLICT DO NOTHING). The trigger is (re)created here with
-- its function, so this file says everything about it.
CREATE OR REPLACE FUNCTION cronbox.add_job_fire() RETURNS trigger
LANGUAGE plpgsql
SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    INSERT INTO cronbox.job_fire (job_id, paused, bucket)
    SELECT a.job_id, a.paused, a.bucket FROM added a
    ON CONFLICT (job_id) DO NOTHING;
    RETURN NULL;
END
$$;

COMMENT ON FUNCTION cronbox.add_job_fire() IS
'Internal (trigger): creates the cronbox.job_fire row of each job inserted into cronbox.job.';

ALTER FUNCTION cronbox.add_job_fire() OWNER TO cronbox_owner;
REVOKE ALL ON FUNCTION cronbox.add_job_fire() FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;

CREATE OR REPLACE TRIGGER job_add_fire AFTER INSERT ON cronbox.job
    REFERENCING NEW TABLE AS added
    FOR EACH STATEMENT EXECUTE FUNCTION cronbox.add_job_fire();
