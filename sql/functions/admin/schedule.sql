-- cronbox.schedule(name, cron | every | at | after, options...): create or update a job.
-- Validates every argument before writing anything (cronbox.validate_schedule_args). The same
-- name again updates the definition in place under the job's row lock: pending scheduled
-- futures after now() are deleted and the frontier is set so the poller recomputes them from
-- the new definition in its next pass; history and the change log are kept. An identical call
-- is a no-op (nothing written, no change-log row). Returns the job id.
-- Thin wrapper: the body is cronbox.schedule_at (internal/schedule_at.sql), called with now();
-- errors are re-raised from here so psql shows one CONTEXT line (docs/sql.md, "Errors").
CREATE OR REPLACE FUNCTION cronbox.schedule(
    name text,
    cron text DEFAULT NULL::text,
    every interval DEFAULT NULL::interval,
    at timestamp with time zone DEFAULT NULL::timestamp with time zone,
    payload jsonb DEFAULT '{}'::jsonb,
    queue text DEFAULT 'default'::text,
    timezone text DEFAULT 'UTC'::text,
    priority integer DEFAULT 0,
    overlap text DEFAULT 'skip'::text,
    on_error text DEFAULT 'retry_schedule'::text,
    max_attempts integer DEFAULT 1,
    retry_delay interval DEFAULT '00:00:10'::interval,
    retry_max_delay interval DEFAULT '01:00:00'::interval,
    timeout interval DEFAULT '00:05:00'::interval,
    catchup text DEFAULT 'latest'::text,
    catchup_window interval DEFAULT '1 day'::interval,
    jitter interval DEFAULT '00:00:00'::interval,
    starts_at timestamp with time zone DEFAULT NULL::timestamp with time zone,
    ends_at timestamp with time zone DEFAULT NULL::timestamp with time zone,
    after text[] DEFAULT NULL::text[],
    every_mode text DEFAULT 'fixed_rate'::text,
    reason text DEFAULT NULL::text,
    max_runs integer DEFAULT NULL::integer,
    exclude text DEFAULT NULL::text,
    needs jsonb DEFAULT NULL::jsonb,
    on_unavailable text DEFAULT 'wait'::text,
    unavailable_timeout interval DEFAULT NULL::interval,
    notify text[] DEFAULT NULL::text[]
) RETURNS bigint
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
    RETURN cronbox.schedule_at($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21, $22, $23, $24, $25, $26, $27, $28, now());
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

COMMENT ON FUNCTION cronbox.schedule(text, text, interval, timestamp with time zone, jsonb, text, text, integer, text, text, integer, interval, interval, interval, text, interval, interval, timestamp with time zone, timestamp with time zone, text[], text, text, integer, text, jsonb, text, interval, text[]) IS
'Creates or updates (same name) a job; returns its id. Exactly one of cron, every, at, after. Every argument is validated before anything is written (SQLSTATE 22004/22023, message starting with the field name). An update deletes the pending scheduled futures and lets the poller recompute them in the same way, atomically; history and the change log (cronbox.schedule_changes) are kept. An identical call is a no-op. max_runs: the schedule finishes after that many scheduled fires; exclude: exclusion calendars (one name or a comma-separated list) whose fires are skipped. needs: units of resource pools a run holds while in flight (cronbox.set_pool), on_unavailable (wait, retry, fail) and unavailable_timeout: what a fire does when they are short; notify: the job''s own recipients (mailto:, https:) of its failure, pause, quarantine, dependency-timeout and unavailable events. See docs/schedules.md and docs/runs.md.';

ALTER FUNCTION cronbox.schedule(text, text, interval, timestamp with time zone, jsonb, text, text, integer, text, text, integer, interval, interval, interval, text, interval, interval, timestamp with time zone, timestamp with time zone, text[], text, text, integer, text, jsonb, text, interval, text[]) OWNER TO cronbox_owner;
REVOKE ALL ON FUNCTION cronbox.schedule(text, text, interval, timestamp with time zone, jsonb, text, text, integer, text, text, integer, interval, interval, interval, text, interval, interval, timestamp with time zone, timestamp with time zone, text[], text, text, integer, text, jsonb, text, interval, text[]) FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
GRANT EXECUTE ON FUNCTION cronbox.schedule(text, text, interval, timestamp with time zone, jsonb, text, text, integer, text, text, integer, interval, interval, interval, text, interval, interval, timestamp with time zone, timestamp with time zone, text[], text, text, integer, text, jsonb, text, interval, text[]) TO cronbox_admin, cronbox_user;
