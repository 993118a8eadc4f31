-- cronbox.caller_reads_all(): true when the caller sees every schedule in the views:
-- cronbox.caller_writes_all() or cronbox_reader. Evaluated once per statement by the policies.
CREATE OR REPLACE FUNCTION cronbox.caller_reads_all() RETURNS boolean
LANGUAGE plpgsql STABLE
SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    -- a reader first (one role check; cronbox.caller()'s expression), then the writers' checks
    RETURN pg_catalog.pg_has_role(CASE WHEN session_user IN ('cronbox_owner', 'cronbox_runner')
                                       THEN coalesce(nullif(pg_catalog.current_setting('cronbox.caller', true), ''), session_user)
                                       ELSE coalesce(nullif(pg_catalog.current_setting('role'), 'none'), session_user) END::name,
                                  'cronbox_reader', 'USAGE')
        OR cronbox.caller_writes_all();
END
$$;

COMMENT ON FUNCTION cronbox.caller_reads_all() IS
'True when the caller sees every schedule in the views: cronbox.caller_writes_all() or cronbox_reader.';

ALTER FUNCTION cronbox.caller_reads_all() OWNER TO cronbox_owner;
REVOKE ALL ON FUNCTION cronbox.caller_reads_all() FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
GRANT EXECUTE ON FUNCTION cronbox.caller_reads_all() TO cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
