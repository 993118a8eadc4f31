-- cronbox.add_dependency(name, upstream, within, wait_timeout, job): gate a scheduled job on an
-- upstream job. The job is `name` like everywhere else; `job =>` (its old spelling) still works
-- for a release: exactly one of the two (neither: 22004, both: 22023). One function with a
-- trailing `job` parameter, not two overloads (PostgreSQL cannot tell two text signatures apart):
-- positional calls ('load', 'extract') mean name, upstream as before. A due fire of the job
-- waits until `upstream` has a success no older than `within` (NULL: since this job's previous
-- fire); past `wait_timeout` (NULL: forever) the fire fails with a clear error and a
-- notification. Calling it again updates within and wait_timeout. Rejects a cycle (named in the error, SQLSTATE 22023) under a transaction
-- advisory lock that serialises dependency changes. Records the change in the change log.
-- Thin wrapper: the body is cronbox.add_dependency_at (internal/add_dependency_at.sql), called with now();
-- errors are re-raised from here so psql shows one CONTEXT line (docs/sql.md, "Errors").
CREATE OR REPLACE FUNCTION cronbox.add_dependency(
    name text DEFAULT NULL::text,
    upstream text DEFAULT NULL::text,
    within interval DEFAULT NULL::interval,
    wait_timeout interval DEFAULT NULL::interval,
    job text DEFAULT NULL::text
) RETURNS void
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
    PERFORM cronbox.add_dependency_at($1, $2, $3, $4, $5, now());
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

COMMENT ON FUNCTION cronbox.add_dependency(text, text, interval, interval, text) IS
'Gates the job name on upstream: a due fire waits for an upstream success no older than within (NULL: since the job''s previous fire), failing with a notification after wait_timeout. Rejects cycles, naming them. job => is the old spelling of name => (kept for a release; give one of them).';

ALTER FUNCTION cronbox.add_dependency(text, text, interval, interval, text) OWNER TO cronbox_owner;
REVOKE ALL ON FUNCTION cronbox.add_dependency(text, text, interval, interval, text) FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
GRANT EXECUTE ON FUNCTION cronbox.add_dependency(text, text, interval, interval, text) TO cronbox_admin, cronbox_user;
