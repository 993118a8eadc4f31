-- 0051: the row-security helpers as PL/pgSQL. Every statement on job, job_future and run
-- evaluates cronbox.caller_writes_all() or caller_reads_all() once (an InitPlan of the
-- policies). As LANGUAGE sql functions with a SET clause they are not inlined and their query
-- on pg_roles was planned anew on every call: ~0.2-0.4 ms each, a few dozen per dispatch or
-- ack batch (pg_stat_statements in bench/throughput --profile: 16 us per run at batch 1,000).
-- PL/pgSQL keeps the plans for the session. Same answers as 0040.
CREATE OR REPLACE FUNCTION cronbox.caller() RETURNS name
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    RETURN coalesce(nullif(current_setting('role'), 'none'), session_user)::name;
END
$$;

CREATE OR REPLACE FUNCTION cronbox.caller_writes_all() RETURNS boolean
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_caller name := cronbox.caller();
BEGIN
    RETURN coalesce((SELECT r.rolsuper OR r.rolbypassrls FROM pg_catalog.pg_roles r
                     WHERE r.rolname = v_caller), false)
        OR pg_has_role(v_caller, 'cronbox_owner', 'USAGE')
        OR pg_has_role(v_caller, 'cronbox_admin', 'USAGE')
        OR pg_has_role(v_caller, 'cronbox_worker', 'USAGE')
        OR pg_has_role(v_caller, 'cronbox_process', 'USAGE');
END
$$;

CREATE OR REPLACE FUNCTION cronbox.caller_reads_all() RETURNS boolean
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    RETURN cronbox.caller_writes_all()
        OR pg_has_role(cronbox.caller(), 'cronbox_reader', 'USAGE');
END
$$;
