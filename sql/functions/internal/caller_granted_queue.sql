-- cronbox.caller_granted_queue(p_kind, p_queue): true when p_queue is granted (kind 'owner' or
-- 'worker', cronbox.queue_grant) to the caller or to a role the caller is a member of (with
-- inheritance, as pg_has_role 'USAGE'); p_queue NULL: any queue of that kind. Grants to a role
-- dropped since are ignored. Reads queue_grant (its primary key) and the catalog; no locks.
CREATE OR REPLACE FUNCTION cronbox.caller_granted_queue(p_kind text, p_queue text) RETURNS boolean
LANGUAGE plpgsql STABLE
SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_caller name := cronbox.caller();
BEGIN
    -- The grantee's role by a function call (NULL, no match, once the role is gone), not a join
    -- with pg_roles: on Citus queue_grant is a reference table, a statement over it runs on its
    -- shard as a whole, and pg_roles would be read there through pg_authid, which the owner role
    -- may not read. The caller is a parameter, decided here.
    RETURN EXISTS (
            SELECT 1
            FROM cronbox.queue_grant g
            WHERE g.kind = p_kind AND (p_queue IS NULL OR g.queue = p_queue)
              AND pg_catalog.pg_has_role(v_caller, pg_catalog.to_regrole(pg_catalog.quote_ident(g.grantee)), 'USAGE'));
END
$$;

COMMENT ON FUNCTION cronbox.caller_granted_queue(text, text) IS
'Internal: true when the queue (NULL: any queue) is granted for p_kind (owner, worker) to the caller or a role it inherits from.';

ALTER FUNCTION cronbox.caller_granted_queue(text, text) OWNER TO cronbox_owner;
REVOKE ALL ON FUNCTION cronbox.caller_granted_queue(text, text) FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
