-- cronbox.pause(name, reason, after_failure, until): stops a job from firing. Under the job's
-- row lock it deletes the pending scheduled futures (first attempts of regular fires) and marks
-- the job paused; the saturation index skips paused jobs. Retry and manual futures stay, held
-- by dispatch until resume. Fires that fall inside the pause are not run and not recorded.
-- until (optional: finite, after now(), at most 366 days ahead): the poller resumes it by
-- itself then (cronbox.resume_paused). Pausing a paused job replaces its until; returns false
-- if the job was already paused with the same until (nothing written). Unknown name: P0002.
-- Thin wrapper: the body is cronbox.pause_at (internal/pause_at.sql), called with now();
-- errors are re-raised from here so psql shows one CONTEXT line (docs/sql.md, "Errors").
CREATE OR REPLACE FUNCTION cronbox.pause(
    name text,
    reason text DEFAULT 'paused by operator'::text,
    after_failure boolean DEFAULT false,
    until timestamptz DEFAULT NULL
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
    RETURN cronbox.pause_at($1, $2, $3, $4, now());
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

COMMENT ON FUNCTION cronbox.pause(text, text, boolean, timestamp with time zone) IS
'Pauses a job: its pending scheduled futures are deleted atomically and no new ones are made; fires inside the pause are skipped (not run, not recorded). after_failure => true logs it as paused_after_failure. until => a time (finite, after now(), at most 366 days ahead): the poller resumes it by itself then, logged as an automatic resume (NULL: until resume()). Pausing a paused job replaces its until; returns false if it was already paused with the same until.';

ALTER FUNCTION cronbox.pause(text, text, boolean, timestamp with time zone) OWNER TO cronbox_owner;
REVOKE ALL ON FUNCTION cronbox.pause(text, text, boolean, timestamp with time zone) FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
GRANT EXECUTE ON FUNCTION cronbox.pause(text, text, boolean, timestamp with time zone) TO cronbox_admin, cronbox_user;
