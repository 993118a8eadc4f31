-- cronbox.caller(): the role a call is made for. Inside a SECURITY DEFINER function current_user
-- is the function's owner, so the caller is the role of the session: the SET ROLE role if one is
-- set, else the login role. Row-security policies and column defaults (job.owner,
-- job_change.changed_by) call it. PL/pgSQL so the plan is kept per session (see 0051's note).
-- On a Citus worker node, in a session of cronbox's owner roles (cronbox_owner, cronbox_runner:
-- the sessions Citus opens for cronbox's SECURITY DEFINER functions), the caller is the one the
-- coordinator carried (cronbox.carry_caller: the setting cronbox.caller), when one was; any other
-- session's setting is ignored (a role may set it, but its session is not an owner's).
-- First created by migration 0040 (the policies need it); this file holds its body.
CREATE OR REPLACE FUNCTION cronbox.caller() RETURNS name
LANGUAGE plpgsql STABLE
SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF session_user IN ('cronbox_owner', 'cronbox_runner') THEN
        RETURN coalesce(nullif(current_setting('cronbox.caller', true), ''), session_user)::name;
    END IF;
    RETURN coalesce(nullif(current_setting('role'), 'none'), session_user)::name;
END
$$;

COMMENT ON FUNCTION cronbox.caller() IS
'The role a call is made for (SET ROLE role, else the login role), also inside SECURITY DEFINER functions; on a Citus worker node, in a session of cronbox''s owner roles, the caller the coordinator carried (cronbox.carry_caller). Schedules record it as owner.';

ALTER FUNCTION cronbox.caller() OWNER TO cronbox_owner;
REVOKE ALL ON FUNCTION cronbox.caller() FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
GRANT EXECUTE ON FUNCTION cronbox.caller() TO cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
