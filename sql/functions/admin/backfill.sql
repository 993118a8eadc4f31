-- cronbox.backfill(name, from, to, overlap, priority): fires each scheduled time of a job from
-- `from` to `to` (both included; finite, from < to <= now(), at most 366 days apart; every
-- and one-off jobs: at most 1000 fires, counted here; cron: the poller fires at most the first
-- 1000). The job's catch-up policy does not apply. Records a request (cronbox.backfills) and a
-- 'backfill' change-log row; the poller materialises the fires as futures of origin 'backfill',
-- skipping fires that already ran or are pending. Returns the request id. Unknown name: P0002.
-- Thin wrapper: the body is cronbox.backfill_at (internal/backfill_at.sql), called with now();
-- errors are re-raised from here so psql shows one CONTEXT line (docs/sql.md, "Errors").
CREATE OR REPLACE FUNCTION cronbox.backfill(
    name text,
    "from" timestamptz,
    "to" timestamptz,
    overlap text DEFAULT 'buffer_all'::text,
    priority integer DEFAULT NULL::integer
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
    RETURN cronbox.backfill_at($1, $2, $3, $4, $5, now());
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

COMMENT ON FUNCTION cronbox.backfill(text, timestamp with time zone, timestamp with time zone, text, integer) IS
'Fires each scheduled time of a job from "from" to "to" (both included; finite, from < to <= now(), at most 366 days apart; every/at jobs at most 1000 fires, cron jobs the first 1000), outside the catch-up policy. overlap (default buffer_all: one after another, oldest first) applies to the backfilled fires; priority defaults to the job''s. A fire that already ran or is pending is not fired again. Recorded in the change log; progress in cronbox.backfills; runs show origin backfill. Returns the request id. Unknown name: P0002.';

ALTER FUNCTION cronbox.backfill(text, timestamp with time zone, timestamp with time zone, text, integer) OWNER TO cronbox_owner;
REVOKE ALL ON FUNCTION cronbox.backfill(text, timestamp with time zone, timestamp with time zone, text, integer) FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
GRANT EXECUTE ON FUNCTION cronbox.backfill(text, timestamp with time zone, timestamp with time zone, text, integer) TO cronbox_admin, cronbox_user;
