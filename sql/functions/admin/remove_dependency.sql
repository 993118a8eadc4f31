-- cronbox.remove_dependency(name, upstream, job): removes a gate added with add_dependency;
-- fires of the job waiting on it are released at once. The job is `name`; `job =>` (its old
-- spelling) still works for a release: exactly one of the two. Takes the dependency advisory
-- lock. Returns whether a gate was removed; raises P0002 for an unknown job name.
-- Thin wrapper: the body is cronbox.remove_dependency_at (internal/remove_dependency_at.sql), called with now();
-- errors are re-raised from here so psql shows one CONTEXT line (docs/sql.md, "Errors").
CREATE OR REPLACE FUNCTION cronbox.remove_dependency(
    name text DEFAULT NULL::text,
    upstream text DEFAULT NULL::text,
    job text DEFAULT NULL::text
) RETURNS boolean
LANGUAGE plpgsql VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_state text;
    v_message text;
    v_detail text;
    v_hint text;
BEGIN
    PERFORM cronbox.carry_caller();  -- on Citus, the caller for the policies on the worker nodes
    RETURN cronbox.remove_dependency_at($1, $2, $3, now());
EXCEPTION WHEN OTHERS THEN
    -- Re-raised from here so that psql shows the message and one CONTEXT line naming the
    -- function the user called, not the internal frames (docs/sql.md, "Errors"): the same
    -- SQLSTATE, message, detail and hint.
    GET STACKED DIAGNOSTICS v_state = RETURNED_SQLSTATE, v_message = MESSAGE_TEXT,
                            v_detail = PG_EXCEPTION_DETAIL, v_hint = PG_EXCEPTION_HINT;
    v_hint := cronbox.error_hint(v_state, v_message, v_hint);  -- a known cause's way out, if it has none
    IF v_detail <> '' AND v_hint <> '' THEN
        RAISE EXCEPTION USING ERRCODE = v_state, MESSAGE = v_message, DETAIL = v_detail, HINT = v_hint;
    ELSIF v_detail <> '' THEN
        RAISE EXCEPTION USING ERRCODE = v_state, MESSAGE = v_message, DETAIL = v_detail;
    ELSIF v_hint <> '' THEN
        RAISE EXCEPTION USING ERRCODE = v_state, MESSAGE = v_message, HINT = v_hint;
    END IF;
    RAISE EXCEPTION USING ERRCODE = v_state, MESSAGE = v_message;
END
$$;

COMMENT ON FUNCTION cronbox.remove_dependency(text, text, text) IS
'Removes the gate of the job name on upstream (add_dependency) and releases fires waiting on it. Returns whether a gate was removed. job => is the old spelling of name => (kept for a release; give one of them).';

ALTER FUNCTION cronbox.remove_dependency(text, text, text) OWNER TO cronbox_owner;
REVOKE ALL ON FUNCTION cronbox.remove_dependency(text, text, text) FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
GRANT EXECUTE ON FUNCTION cronbox.remove_dependency(text, text, text) TO cronbox_admin, cronbox_user;
