-- cronbox.caller_is_operator(): true when no queue grant or quota limits the caller: a
-- superuser or BYPASSRLS role, cronbox_owner, cronbox_admin or cronbox_process (the poller and
-- relay work every queue). Reads the catalog only; no locks.
CREATE OR REPLACE FUNCTION cronbox.caller_is_operator() RETURNS boolean
LANGUAGE plpgsql STABLE
SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    RETURN coalesce((SELECT r.rolsuper OR r.rolbypassrls FROM pg_catalog.pg_roles r
                         WHERE r.rolname = cronbox.caller()), false)
            OR pg_catalog.pg_has_role(cronbox.caller(), 'cronbox_owner', 'USAGE')
            OR pg_catalog.pg_has_role(cronbox.caller(), 'cronbox_admin', 'USAGE')
            OR pg_catalog.pg_has_role(cronbox.caller(), 'cronbox_process', 'USAGE');
END
$$;

COMMENT ON FUNCTION cronbox.caller_is_operator() IS
'Internal: true when queue grants and quotas do not limit the caller (superuser, BYPASSRLS, cronbox_owner, cronbox_admin, cronbox_process).';

ALTER FUNCTION cronbox.caller_is_operator() OWNER TO cronbox_owner;
REVOKE ALL ON FUNCTION cronbox.caller_is_operator() FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
