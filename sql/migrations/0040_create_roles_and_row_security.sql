-- 0040: least privilege. Creates the cronbox roles (cluster-wide, only if missing), the
-- caller-identity helpers the row-security policies use, and row-level security on the
-- tables that hold per-schedule data, so a role that is not an administrator sees and
-- changes only the schedules it owns and their runs (like pg_cron's cron.job).
-- Grants, ownership and SECURITY DEFINER are set by sql/grants.sql on every migrate.
--
-- Roles (NOLOGIN; operators grant them to login roles):
--   cronbox_owner    owns every object in schema cronbox; SECURITY DEFINER functions run as it
--   cronbox_admin    manages all schedules (schedule, pause, trigger, limits, redrive, ...), all views
--   cronbox_user     manages the schedules it owns; sees only those (and their runs) in the views
--   cronbox_worker   worker functions only (start_run, heartbeat, complete_run, fail_run, claim_runs)
--   cronbox_reader   reads all views, writes nothing
--   cronbox_process  what `cronbox poller` and `cronbox relay` call (+ worker, + reader)

DO $$
DECLARE
    v_role text;
BEGIN
    FOREACH v_role IN ARRAY ARRAY['cronbox_owner', 'cronbox_admin', 'cronbox_user',
                                  'cronbox_worker', 'cronbox_reader', 'cronbox_process'] LOOP
        IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_roles WHERE rolname = v_role) THEN
            BEGIN
                EXECUTE format('CREATE ROLE %I NOLOGIN', v_role);
            EXCEPTION
                WHEN duplicate_object THEN NULL;  -- another database of this cluster migrating now
                WHEN insufficient_privilege THEN
                    RAISE EXCEPTION 'roles: cannot create role % (the migrating role needs CREATEROLE)', v_role
                        USING ERRCODE = 'insufficient_privilege',
                              HINT = 'ask a superuser to run: CREATE ROLE ' || v_role || ' NOLOGIN;';
            END;
        END IF;
    END LOOP;
    -- The processes also complete runs (a worker's HTTP answer) and read the views (gauges).
    GRANT cronbox_worker TO cronbox_process;
    GRANT cronbox_reader TO cronbox_process;
    -- A non-superuser migrator must be able to hand objects to cronbox_owner (grants.sql).
    IF NOT pg_catalog.pg_has_role(current_user, 'cronbox_owner', 'MEMBER') THEN
        EXECUTE format('GRANT cronbox_owner TO %I', current_user);
    END IF;
END
$$;

-- The role a call is made for. Inside a SECURITY DEFINER function current_user is the
-- function's owner, so the caller is the role of the session: the SET ROLE role if one is
-- set, else the login role.
CREATE OR REPLACE FUNCTION cronbox.caller() RETURNS name
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT coalesce(nullif(current_setting('role'), 'none'), session_user)::name
$$;
COMMENT ON FUNCTION cronbox.caller() IS
'The role a call is made for (SET ROLE role, else the login role), also inside SECURITY DEFINER functions. Schedules record it as owner.';

-- Roles whose calls may change any schedule's rows (through the functions they may call).
CREATE OR REPLACE FUNCTION cronbox.caller_writes_all() RETURNS boolean
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT coalesce((SELECT r.rolsuper OR r.rolbypassrls FROM pg_catalog.pg_roles r
                     WHERE r.rolname = cronbox.caller()), false)
        OR pg_catalog.pg_has_role(cronbox.caller(), 'cronbox_owner', 'USAGE')
        OR pg_catalog.pg_has_role(cronbox.caller(), 'cronbox_admin', 'USAGE')
        OR pg_catalog.pg_has_role(cronbox.caller(), 'cronbox_worker', 'USAGE')
        OR pg_catalog.pg_has_role(cronbox.caller(), 'cronbox_process', 'USAGE')
$$;
COMMENT ON FUNCTION cronbox.caller_writes_all() IS
'True when the caller is not limited to its own schedules: superuser, cronbox_owner, cronbox_admin, cronbox_worker or cronbox_process.';

-- Roles that may see every schedule's rows in the views.
CREATE OR REPLACE FUNCTION cronbox.caller_reads_all() RETURNS boolean
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT cronbox.caller_writes_all()
        OR pg_catalog.pg_has_role(cronbox.caller(), 'cronbox_reader', 'USAGE')
$$;
COMMENT ON FUNCTION cronbox.caller_reads_all() IS
'True when the caller sees every schedule in the views: cronbox.caller_writes_all() or cronbox_reader.';

-- Schedules and their change log are attributed to the caller, not to the function owner.
ALTER TABLE cronbox.job ALTER COLUMN owner SET DEFAULT cronbox.caller();
ALTER TABLE cronbox.job_change ALTER COLUMN changed_by SET DEFAULT cronbox.caller();

-- Row-level security, FORCEd so it also holds inside SECURITY DEFINER functions and views
-- (both run as cronbox_owner). Each policy wraps the helpers in a scalar sub-SELECT: an
-- InitPlan evaluated once per statement, so the processes (which see everything) pay one
-- call per statement, not one per row. Inserts are only done by cronbox's own functions,
-- which decide what to write; only cronbox.job checks that the owner is the caller.
ALTER TABLE cronbox.job ENABLE ROW LEVEL SECURITY;
ALTER TABLE cronbox.job FORCE ROW LEVEL SECURITY;
CREATE POLICY job_read ON cronbox.job FOR SELECT
    USING ((SELECT cronbox.caller_reads_all()) OR owner = (SELECT cronbox.caller()));
CREATE POLICY job_insert ON cronbox.job FOR INSERT
    WITH CHECK ((SELECT cronbox.caller_writes_all()) OR owner = (SELECT cronbox.caller()));
CREATE POLICY job_update ON cronbox.job FOR UPDATE
    USING ((SELECT cronbox.caller_writes_all()) OR owner = (SELECT cronbox.caller()))
    WITH CHECK ((SELECT cronbox.caller_writes_all()) OR owner = (SELECT cronbox.caller()));
CREATE POLICY job_delete ON cronbox.job FOR DELETE
    USING ((SELECT cronbox.caller_writes_all()) OR owner = (SELECT cronbox.caller()));

-- Tables keyed by job_id: a row belongs to whoever owns its job. The sub-SELECT on
-- cronbox.job is itself filtered by job's policies.
ALTER TABLE cronbox.job_future ENABLE ROW LEVEL SECURITY;
ALTER TABLE cronbox.job_future FORCE ROW LEVEL SECURITY;
CREATE POLICY job_future_read ON cronbox.job_future FOR SELECT
    USING ((SELECT cronbox.caller_reads_all())
           OR EXISTS (SELECT 1 FROM cronbox.job j WHERE j.job_id = job_future.job_id
                      AND j.owner = (SELECT cronbox.caller())));
CREATE POLICY job_future_insert ON cronbox.job_future FOR INSERT WITH CHECK (true);
CREATE POLICY job_future_change ON cronbox.job_future FOR UPDATE
    USING ((SELECT cronbox.caller_writes_all())
           OR EXISTS (SELECT 1 FROM cronbox.job j WHERE j.job_id = job_future.job_id
                      AND j.owner = (SELECT cronbox.caller())));
CREATE POLICY job_future_delete ON cronbox.job_future FOR DELETE
    USING ((SELECT cronbox.caller_writes_all())
           OR EXISTS (SELECT 1 FROM cronbox.job j WHERE j.job_id = job_future.job_id
                      AND j.owner = (SELECT cronbox.caller())));

ALTER TABLE cronbox.run ENABLE ROW LEVEL SECURITY;
ALTER TABLE cronbox.run FORCE ROW LEVEL SECURITY;
CREATE POLICY run_read ON cronbox.run FOR SELECT
    USING ((SELECT cronbox.caller_reads_all())
           OR EXISTS (SELECT 1 FROM cronbox.job j WHERE j.job_id = run.job_id
                      AND j.owner = (SELECT cronbox.caller())));
CREATE POLICY run_insert ON cronbox.run FOR INSERT WITH CHECK (true);
CREATE POLICY run_update ON cronbox.run FOR UPDATE
    USING ((SELECT cronbox.caller_writes_all())
           OR EXISTS (SELECT 1 FROM cronbox.job j WHERE j.job_id = run.job_id
                      AND j.owner = (SELECT cronbox.caller())));
CREATE POLICY run_delete ON cronbox.run FOR DELETE
    USING ((SELECT cronbox.caller_writes_all()));

ALTER TABLE cronbox.job_change ENABLE ROW LEVEL SECURITY;
ALTER TABLE cronbox.job_change FORCE ROW LEVEL SECURITY;
CREATE POLICY job_change_read ON cronbox.job_change FOR SELECT
    USING ((SELECT cronbox.caller_reads_all())
           OR EXISTS (SELECT 1 FROM cronbox.job j WHERE j.job_id = job_change.job_id
                      AND j.owner = (SELECT cronbox.caller())));
CREATE POLICY job_change_insert ON cronbox.job_change FOR INSERT WITH CHECK (true);

-- Messages of runs belong to the run's job owner; notifications (no run) to administrators.
ALTER TABLE cronbox.outbox ENABLE ROW LEVEL SECURITY;
ALTER TABLE cronbox.outbox FORCE ROW LEVEL SECURITY;
CREATE POLICY outbox_read ON cronbox.outbox FOR SELECT
    USING ((SELECT cronbox.caller_reads_all())
           OR EXISTS (SELECT 1 FROM cronbox.run r WHERE r.run_id = outbox.run_id));
CREATE POLICY outbox_insert ON cronbox.outbox FOR INSERT WITH CHECK (true);
CREATE POLICY outbox_update ON cronbox.outbox FOR UPDATE
    USING ((SELECT cronbox.caller_writes_all())
           OR EXISTS (SELECT 1 FROM cronbox.run r JOIN cronbox.job j ON j.job_id = r.job_id
                      WHERE r.run_id = outbox.run_id AND j.owner = (SELECT cronbox.caller())));
CREATE POLICY outbox_delete ON cronbox.outbox FOR DELETE
    USING ((SELECT cronbox.caller_writes_all())
           OR EXISTS (SELECT 1 FROM cronbox.run r JOIN cronbox.job j ON j.job_id = r.job_id
                      WHERE r.run_id = outbox.run_id AND j.owner = (SELECT cronbox.caller())));
