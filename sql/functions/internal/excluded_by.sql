-- cronbox.excluded_by(p_calendars, p_fire_at): the name of the first (by name) of the given
-- exclusion calendars that excludes a fire at p_fire_at, or NULL when none does. A calendar
-- excludes a fire whose local date in the calendar's time zone is one of its dates or lies in
-- one of its date ranges, or whose local time matches one of its cron expressions to the
-- minute (the seconds field is not looked at). THE exclusion predicate: cronbox.store_fires
-- (what the poller stores) and cronbox.upcoming_fires (preview, next_fires) both call it, so
-- they cannot disagree. Reads cronbox.calendar by primary key; no lock.
CREATE OR REPLACE FUNCTION cronbox.excluded_by(p_calendars bigint[], p_fire_at timestamptz)
RETURNS text
LANGUAGE sql STABLE
SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT min(c.name)
    FROM cronbox.calendar c
    CROSS JOIN LATERAL (SELECT p_fire_at AT TIME ZONE c.timezone AS wall) l
    WHERE cardinality(p_calendars) > 0
      AND c.calendar_id = ANY (p_calendars)
      AND (l.wall::date = ANY (c.dates)
           OR EXISTS (SELECT 1 FROM unnest(c.ranges) AS r(days) WHERE r.days @> l.wall::date)
           OR EXISTS (SELECT 1 FROM unnest(c.crons) AS e(cron) WHERE cronbox.cron_matches(e.cron, l.wall)))
$$;

COMMENT ON FUNCTION cronbox.excluded_by(bigint[], timestamp with time zone) IS
'Internal: the exclusion predicate shared by cronbox.store_fires and preview/next_fires: the name of the first of the given calendars that excludes a fire at p_fire_at (its local date listed or in a listed range, or its local time matching a listed cron expression to the minute), NULL if none.';

ALTER FUNCTION cronbox.excluded_by(bigint[], timestamp with time zone) OWNER TO cronbox_owner;
REVOKE ALL ON FUNCTION cronbox.excluded_by(bigint[], timestamp with time zone) FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
