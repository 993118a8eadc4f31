-- cronbox.catchup_start(p_now, p_window): the start of a job's catch-up window, the one rule
-- both schedule() and the poller use: p_now - p_window in the UTC calendar (a month is a
-- calendar month, a day is 24 hours, whatever the session's or the job's time zone).
-- Never fails: a window longer than 100 years counts as 100 years, a negative one as zero,
-- so a row written before the bounds existed cannot break a saturation pass.
CREATE OR REPLACE FUNCTION cronbox.catchup_start(p_now timestamptz, p_window interval)
RETURNS timestamptz
LANGUAGE sql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT CASE
        WHEN p_now IS NULL OR NOT isfinite(p_now) THEN p_now
        WHEN p_window IS NULL OR p_window <= interval '0' THEN p_now
        WHEN p_window > interval '100 years'
            THEN (p_now AT TIME ZONE 'UTC' - interval '100 years') AT TIME ZONE 'UTC'
        ELSE (p_now AT TIME ZONE 'UTC' - p_window) AT TIME ZONE 'UTC' END
$$;

COMMENT ON FUNCTION cronbox.catchup_start(timestamptz, interval) IS
'Internal: start of the catch-up window, p_now - p_window in the UTC calendar (months are calendar months, days 24 hours); windows above 100 years count as 100 years. Used by schedule() and the poller''s saturation claim.';

ALTER FUNCTION cronbox.catchup_start(timestamptz, interval) OWNER TO cronbox_owner;
REVOKE ALL ON FUNCTION cronbox.catchup_start(timestamptz, interval) FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
