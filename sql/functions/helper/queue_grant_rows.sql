-- cronbox.queue_grant_rows(): the rows of the view cronbox.queue_grants: each queue grant and
-- whether its role still exists. SECURITY DEFINER, one text for plain PostgreSQL and Citus: on
-- Citus cronbox.queue_grant is a reference table, and a view's reference table is read through
-- its shard with the privileges of the role querying the view, which may not read cronbox's
-- tables. Whether the role exists is a function call, not a join with pg_roles: on Citus the
-- statement over the reference table is run on its shard as a whole, and pg_roles there would be
-- read as cronbox_owner through pg_authid, which it may not read. Only callers who read
-- everything (cronbox.caller_reads_all: readers, administrators) get rows. No locks.
CREATE OR REPLACE FUNCTION cronbox.queue_grant_rows()
RETURNS TABLE (queue text, role name, kind text, granted_by name, granted_at timestamptz, role_exists boolean)
LANGUAGE sql STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT g.queue, g.grantee, g.kind, g.granted_by, g.granted_at,
           to_regrole(quote_ident(g.grantee)) IS NOT NULL
    FROM cronbox.queue_grant g
    WHERE cronbox.caller_reads_all()
$$;

COMMENT ON FUNCTION cronbox.queue_grant_rows() IS
'The rows of cronbox.queue_grants (each queue grant, whether its role exists); none for a caller who does not read everything.';

ALTER FUNCTION cronbox.queue_grant_rows() OWNER TO cronbox_owner;
REVOKE ALL ON FUNCTION cronbox.queue_grant_rows() FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
GRANT EXECUTE ON FUNCTION cronbox.queue_grant_rows() TO cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
