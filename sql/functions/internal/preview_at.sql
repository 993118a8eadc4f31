-- Internal: the body of cronbox.preview, with the time as its last parameter p_now. The public
-- cronbox.preview passes now(); no cronbox role may execute this one (tests call it as the
-- owner or a superuser to fix the clock).
-- cronbox.preview_at(cron | every, timezone, starts_at, n, exclude, p_now): the next n fire
-- times (after p_now) a schedule with this definition would get, computed as the poller
-- computes them (cronbox.plan_fires: the SQL fire engine proven to agree with
-- poller/cron.py) and without the fires the named exclusion calendars drop. Arguments are
-- checked as schedule() checks them; n is 1..1000; the search looks at most 10 years ahead.
-- Writes nothing, takes no lock.
CREATE OR REPLACE FUNCTION cronbox.preview_at(
    cron      text        DEFAULT NULL,
    every     interval    DEFAULT NULL,
    timezone  text        DEFAULT 'UTC',
    starts_at timestamptz DEFAULT NULL,
    n         integer     DEFAULT 10,
    exclude   text        DEFAULT NULL,
    p_now     timestamptz DEFAULT now()
) RETURNS TABLE (fire_at timestamptz)
LANGUAGE plpgsql STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_calendars bigint[];
BEGIN
    IF (preview_at.cron IS NULL) = (preview_at.every IS NULL) THEN
        RAISE EXCEPTION 'preview: give exactly one of cron, every; got %',
            CASE WHEN preview_at.cron IS NULL THEN 'none' ELSE 'cron and every' END
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    -- schedule()'s own checks, with every other option at its declared default
    PERFORM cronbox.validate_schedule_args(
        (SELECT jsonb_object_agg(o.option, CASE WHEN o.type = 'jsonb' THEN o.default_value::jsonb
                                                ELSE to_jsonb(o.default_value) END)
         FROM cronbox.schedule_options() o)
        || jsonb_build_object('name', 'preview', 'cron', preview_at.cron, 'every', preview_at.every,
                              'timezone', preview_at.timezone, 'starts_at', preview_at.starts_at));
    PERFORM cronbox.checked_limit('n', preview_at.n, 1000);
    v_calendars := cronbox.resolve_calendars(preview_at.exclude);
    RETURN QUERY
    SELECT f.t FROM cronbox.plan_fires(
        CASE WHEN preview_at.cron IS NOT NULL THEN 'cron' ELSE 'every' END,
        preview_at.cron, preview_at.timezone, preview_at.every,
        coalesce(preview_at.starts_at, date_trunc('second', p_now) + preview_at.every),
        NULL, preview_at.starts_at, NULL, p_now, v_calendars, preview_at.n,
        p_now + interval '10 years') AS f(t);
END
$$;

COMMENT ON FUNCTION cronbox.preview_at(text, interval, text, timestamp with time zone, integer, text, timestamp with time zone) IS
'Internal (no cronbox role may execute it): the body of cronbox.preview(text, interval, text, timestamp with time zone, integer, text) with the time as p_now; tests use it to fix the clock. The next n fire times after now of a schedule with this definition, as the poller computes them, without the fires the named exclusion calendars drop. n 1..1000; at most 10 years ahead.';

ALTER FUNCTION cronbox.preview_at(text, interval, text, timestamp with time zone, integer, text, timestamp with time zone) OWNER TO cronbox_owner;
REVOKE ALL ON FUNCTION cronbox.preview_at(text, interval, text, timestamp with time zone, integer, text, timestamp with time zone) FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
