-- cronbox.caller_writes_all(): true when the caller's calls may change any schedule's rows
-- (through the functions it may call): superuser/BYPASSRLS, cronbox_owner, cronbox_admin,
-- cronbox_worker, cronbox_process. Evaluated once per statement by the row-security policies
-- (a report starts ~20 such statements): the role checks first, as one expression, the catalog
-- query only when they all say no.
CREATE OR REPLACE FUNCTION cronbox.caller_writes_all() RETURNS boolean
LANGUAGE plpgsql STABLE
SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    -- cronbox.caller()'s expression, not a call of it (a PL/pgSQL call per policy check)
    v_caller name := CASE WHEN session_user IN ('cronbox_owner', 'cronbox_runner')
                          THEN coalesce(nullif(pg_catalog.current_setting('cronbox.caller', true), ''), session_user)
                          ELSE coalesce(nullif(pg_catalog.current_setting('role'), 'none'), session_user) END::name;
BEGIN
    -- The roles that call most first, as one expression (OR stops at the first true; a
    -- superuser has the privileges of every role): the catalog is read, by a statement of its
    -- own, only for the other roles (BYPASSRLS).
    IF pg_catalog.pg_has_role(v_caller, 'cronbox_worker', 'USAGE')
       OR pg_catalog.pg_has_role(v_caller, 'cronbox_process', 'USAGE')
       OR pg_catalog.pg_has_role(v_caller, 'cronbox_owner', 'USAGE')
       OR pg_catalog.pg_has_role(v_caller, 'cronbox_admin', 'USAGE') THEN
        RETURN true;
    END IF;
    RETURN coalesce((SELECT r.rolsuper OR r.rolbypassrls FROM pg_catalog.pg_roles r
                     WHERE r.rolname = v_caller), false);
END
$$;

COMMENT ON FUNCTION cronbox.caller_writes_all() IS
'True when the caller is not limited to its own schedules: superuser, cronbox_owner, cronbox_admin, cronbox_worker or cronbox_process.';

ALTER FUNCTION cronbox.caller_writes_all() OWNER TO cronbox_owner;
REVOKE ALL ON FUNCTION cronbox.caller_writes_all() FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
GRANT EXECUTE ON FUNCTION cronbox.caller_writes_all() TO cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
