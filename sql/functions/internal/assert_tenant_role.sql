-- cronbox.assert_tenant_role(p_field, p_role): a role named in grant_queue, revoke_queue or
-- set_quota: not NULL (22004), at most 63 characters (22023), an existing role (P0002), and
-- not one of cronbox's own roles (cronbox_*: 22023; they are never limited by grants or quotas).
-- Returns it as a name. Reads the catalog; no locks.
CREATE OR REPLACE FUNCTION cronbox.assert_tenant_role(p_field text, p_role text) RETURNS name
LANGUAGE plpgsql STABLE
SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    PERFORM cronbox.assert_not_null(p_field, p_role);
    IF length(p_role) NOT BETWEEN 1 AND 63 THEN
        RAISE EXCEPTION '%: must be a role name of 1 to 63 characters, got % characters', p_field, length(p_role)
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_role ~* '^(cronbox_|pg_)' THEN
        RAISE EXCEPTION '%: % is a built-in role: grants and quotas are for the roles of tenants', p_field, quote_ident(p_role)
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_roles r WHERE r.rolname = p_role) THEN
        RAISE EXCEPTION '%: no role named %', p_field, quote_ident(p_role) USING ERRCODE = 'no_data_found';
    END IF;
    RETURN p_role::name;
END
$$;

COMMENT ON FUNCTION cronbox.assert_tenant_role(text, text) IS
'Internal argument check: an existing role other than cronbox''s own (22004 NULL, 22023 too long or built-in, P0002 unknown).';

ALTER FUNCTION cronbox.assert_tenant_role(text, text) OWNER TO cronbox_owner;
REVOKE ALL ON FUNCTION cronbox.assert_tenant_role(text, text) FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
