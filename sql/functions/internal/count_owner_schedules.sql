-- cronbox.count_owner_schedules(): keeps cronbox.owner_quota's schedules and fire_rate (the
-- owner's use) in step with cronbox.job, for the owners that have a quota: a statement trigger
-- over the inserted or deleted jobs, whoever inserts or deletes them (schedule, unschedule, a
-- bulk statement), one UPDATE per statement (nothing to update while no quota exists). The
-- triggers are (re)created here with their function, so this file says everything about them.
CREATE OR REPLACE FUNCTION cronbox.count_owner_schedules() RETURNS trigger
LANGUAGE plpgsql
SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        UPDATE cronbox.owner_quota q SET schedules = q.schedules + c.n, fire_rate = q.fire_rate + c.rate
        FROM (SELECT a.owner, count(*) AS n, coalesce(sum(a.fire_rate), 0) AS rate FROM added a GROUP BY a.owner) c
        WHERE q.owner = c.owner;
    ELSE
        UPDATE cronbox.owner_quota q SET schedules = greatest(q.schedules - c.n, 0),
                                         fire_rate = greatest(q.fire_rate - c.rate, 0)
        FROM (SELECT r.owner, count(*) AS n, coalesce(sum(r.fire_rate), 0) AS rate FROM removed r GROUP BY r.owner) c
        WHERE q.owner = c.owner;
    END IF;
    RETURN NULL;
END
$$;

COMMENT ON FUNCTION cronbox.count_owner_schedules() IS
'Internal (trigger): keeps the schedules count and fire-rate sum of owners with a quota (cronbox.owner_quota) as jobs are inserted and deleted.';

ALTER FUNCTION cronbox.count_owner_schedules() OWNER TO cronbox_owner;
REVOKE ALL ON FUNCTION cronbox.count_owner_schedules() FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;

CREATE OR REPLACE TRIGGER job_count_added AFTER INSERT ON cronbox.job
    REFERENCING NEW TABLE AS added
    FOR EACH STATEMENT EXECUTE FUNCTION cronbox.count_owner_schedules();
CREATE OR REPLACE TRIGGER job_count_removed AFTER DELETE ON cronbox.job
    REFERENCING OLD TABLE AS removed
    FOR EACH STATEMENT EXECUTE FUNCTION cronbox.count_owner_schedules();
