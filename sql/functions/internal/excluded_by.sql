-- cronbox.excluded_by(p_calendars, p_fires): for each fire of p_fires, the name of the first
-- (by name) of the given exclusion calendars that excludes it, or NULL when none does (an
-- array aligned with p_fires). A calendar excludes a fire whose local date in the calendar's
-- time zone is one of its dates or lies in one of its date ranges, or whose local time matches
-- one of its cron expressions to the minute (the seconds field is not looked at; days as in
-- cronbox.cron_fires: both day fields restricted, either matches; L, d#n, Ld).
-- THE exclusion predicate: cronbox.store_fires (what the poller stores) and
-- cronbox.plan_fires (preview, next_fires) both call it, so they cannot disagree.
-- Set-based: each calendar and expression is read and expanded once per call, then every fire
-- is tested by arithmetic. Reads cronbox.calendar by primary key; no lock.
CREATE OR REPLACE FUNCTION cronbox.excluded_by(p_calendars bigint[], p_fires timestamptz[])
RETURNS text[]
LANGUAGE sql STABLE
SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
    WITH cal AS MATERIALIZED (
        SELECT c.name, c.timezone, c.dates, c.ranges, c.crons
        FROM cronbox.calendar c
        WHERE c.calendar_id = ANY (p_calendars)
    ),
    -- each cron expression of the calendars, expanded once
    expr AS MATERIALIZED (
        SELECT c.name, c.timezone,
               cronbox.cron_values(e.f[2], 0, 59) AS mins,
               cronbox.cron_values(e.f[3], 0, 23) AS hours,
               cronbox.cron_values(array_to_string(array_remove(string_to_array(e.f[4], ','), 'L'), ','), 1, 31) AS doms,
               'L' = ANY (string_to_array(e.f[4], ',')) AS dom_last,
               cronbox.cron_values(e.f[5], 1, 12) AS mons,
               CASE WHEN e.f[6] ~ '[#L]' THEN '{}'::integer[] ELSE cronbox.cron_values(e.f[6], 0, 7) END AS dows,
               ARRAY(SELECT (split_part(x, '#', 1)::integer % 7) * 10 + split_part(x, '#', 2)::integer
                     FROM unnest(string_to_array(e.f[6], ',')) x WHERE x LIKE '%#%') AS nths,
               ARRAY(SELECT substr(x, 2)::integer % 7 FROM unnest(string_to_array(e.f[6], ',')) x WHERE x LIKE 'L%') AS last_dows,
               e.f[6] ~ '[#L]' AS special,
               -- which day fields leave the days unrestricted: the rule of cron_fires (preview)
               r.dom_all, r.dow_all,
               CASE WHEN e.f[7] = '*' THEN NULL ELSE cronbox.cron_values(e.f[7], 1970, 2099) END AS years
        FROM cal c
        CROSS JOIN LATERAL (SELECT string_to_array(x.cron, ' ') AS f FROM unnest(c.crons) AS x(cron)) e
        CROSS JOIN LATERAL cronbox.cron_day_rule(e.f[4], e.f[6]) r
    ),
    fire AS (
        SELECT f.t, f.i FROM unnest(p_fires) WITH ORDINALITY AS f(t, i)
    )
    SELECT coalesce(array_agg(m.name ORDER BY fire.i), '{}')
    FROM fire
    CROSS JOIN LATERAL (
        SELECT min(hit.name) AS name FROM (
            SELECT c.name FROM cal c
            CROSS JOIN LATERAL (SELECT (fire.t AT TIME ZONE c.timezone)::date AS day) l
            WHERE l.day = ANY (c.dates) OR EXISTS (SELECT 1 FROM unnest(c.ranges) AS r(days) WHERE r.days @> l.day)
            UNION ALL
            SELECT e.name FROM expr e
            CROSS JOIN LATERAL (SELECT fire.t AT TIME ZONE e.timezone AS wall) w
            CROSS JOIN LATERAL (SELECT extract(day FROM w.wall)::integer AS d, extract(dow FROM w.wall)::integer AS wd,
                                       extract(day FROM date_trunc('month', w.wall) + interval '1 month - 1 day')::integer AS last_day) k
            WHERE extract(minute FROM w.wall)::integer = ANY (e.mins)
              AND extract(hour FROM w.wall)::integer = ANY (e.hours)
              AND extract(month FROM w.wall)::integer = ANY (e.mons)
              AND (e.years IS NULL OR extract(year FROM w.wall)::integer = ANY (e.years))
              AND CASE
                  -- # and L days of the week (a day-of-month is refused with them)
                  WHEN e.special THEN k.wd * 10 + (k.d + 6) / 7 = ANY (e.nths)
                                      OR (k.wd = ANY (e.last_dows) AND k.d + 7 > k.last_day)
                  WHEN e.dom_all AND e.dow_all THEN true
                  WHEN e.dom_all THEN k.wd = ANY (e.dows)
                  WHEN e.dow_all THEN k.d = ANY (e.doms) OR (e.dom_last AND k.d = k.last_day)
                  ELSE k.d = ANY (e.doms) OR (e.dom_last AND k.d = k.last_day) OR k.wd = ANY (e.dows) END
        ) hit
    ) m
$$;

COMMENT ON FUNCTION cronbox.excluded_by(bigint[], timestamp with time zone[]) IS
'Internal: the exclusion predicate shared by cronbox.store_fires and preview/next_fires: for each fire, the name of the first of the given calendars that excludes it (its local date listed or in a listed range, or its local time matching a listed cron expression to the minute), NULL if none. Set-based over the fires.';

ALTER FUNCTION cronbox.excluded_by(bigint[], timestamp with time zone[]) OWNER TO cronbox_owner;
REVOKE ALL ON FUNCTION cronbox.excluded_by(bigint[], timestamp with time zone[]) FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
