-- cronbox.cron_fires(p_cron, p_timezone, p_after, p_n, p_until): the first p_n fires of a cron
-- expression strictly after p_after and at most p_until, ascending: the poller's rule in SQL
-- (poller/cron.py, croniter walking wall-clock times + cronbox's DST mapping), so preview and
-- next_fires show what the poller will store; tests/test_preview.py proves the two agree.
-- Walks days (skipping years and months that cannot match), then the day's matching wall
-- times; each wall time is mapped to its real instants: one; in a fall-back fold two (a
-- fixed-time job, Debian cron's rule, takes the first); in a spring-forward gap none (a
-- fixed-time job fires at the first instant after the gap). Work is bounded by p_n and by
-- p_until (the caller's search bound). Pure: reads no table, takes no lock.
CREATE OR REPLACE FUNCTION cronbox.cron_fires(
    p_cron     text,
    p_timezone text,
    p_after    timestamptz,
    p_n        integer,
    p_until    timestamptz
) RETURNS timestamptz[]
LANGUAGE plpgsql STABLE PARALLEL SAFE
SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
SET TimeZone = 'UTC'  -- timestamptz + interval must not follow the session's DST rules
AS $$
DECLARE
    v_f text[] := string_to_array(cronbox.normalize_cron(p_cron), ' ');
    v_sec integer[];
    v_min integer[];
    v_hour integer[];
    v_dom integer[];
    v_mon integer[];
    v_dow integer[];
    v_year integer[];
    v_dom_all boolean;
    v_dow_all boolean;
    v_dom_last boolean;
    v_nth integer[] := '{}';      -- d#n as d * 10 + n
    v_last_dow integer[] := '{}'; -- Ld
    v_special boolean;
    v_fixed boolean;
    v_item text;
    v_out timestamptz[] := '{}';
    v_day date;
    v_end date;
    v_last_day integer;
    v_y integer;
    v_m integer;
    v_dd integer;
    v_w integer;
    v_dom_ok boolean;
    v_dow_ok boolean;
    v_day_ok boolean;
    v_midnight timestamp;
    v_o1 interval;
    v_o2 interval;
    v_o3 interval;
    v_omin interval;
    v_omax interval;
    v_wall timestamp;
    v_lo timestamptz;
    v_hi timestamptz;
    v_mid timestamptz;
    v_gap_end timestamptz;
    v_h integer;
    v_got timestamptz[];
BEGIN
    IF p_n < 1 OR p_after IS NULL OR p_until IS NULL OR p_after >= p_until THEN
        RETURN v_out;
    END IF;
    v_sec := cronbox.cron_values(v_f[1], 0, 59);
    v_min := cronbox.cron_values(v_f[2], 0, 59);
    v_hour := cronbox.cron_values(v_f[3], 0, 23);
    v_mon := cronbox.cron_values(v_f[5], 1, 12);
    v_year := CASE WHEN v_f[7] = '*' THEN NULL ELSE cronbox.cron_values(v_f[7], 1970, 2099) END;
    -- which day fields leave the days unrestricted, as croniter reads them (`*`, `*,L`, a field
    -- listing every value beside a `*` in the other): the rule calendars match with too
    SELECT r.dom_all, r.dow_all INTO v_dom_all, v_dow_all FROM cronbox.cron_day_rule(v_f[4], v_f[6]) r;
    v_dom_last := 'L' = ANY (string_to_array(v_f[4], ','));
    v_dom := cronbox.cron_values(array_to_string(array_remove(string_to_array(v_f[4], ','), 'L'), ','), 1, 31);
    v_special := v_f[6] ~ '[#L]';
    IF v_special THEN
        FOREACH v_item IN ARRAY string_to_array(v_f[6], ',') LOOP
            IF v_item LIKE 'L%' THEN
                v_last_dow := v_last_dow || (substr(v_item, 2)::integer % 7);
            ELSE
                v_nth := v_nth || ((split_part(v_item, '#', 1)::integer % 7) * 10 + split_part(v_item, '#', 2)::integer);
            END IF;
        END LOOP;
        IF NOT v_dom_all THEN
            -- croniter (the poller) ignores such a day-of-month, or finds no date at all.
            RAISE EXCEPTION 'cron: a day-of-month restriction together with # or L days of the week is not supported by preview and next_fires, got "%"', p_cron
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
    ELSE
        v_dow := cronbox.cron_values(v_f[6], 0, 7);
    END IF;
    -- Debian cron's rule: fixed-time unless the minute or the hour field starts with `*`.
    v_fixed := NOT (v_f[2] LIKE '*%' OR v_f[3] LIKE '*%');

    -- Local days that can hold a fire after p_after: offsets lie within -12 h .. +14 h.
    v_day := ((p_after AT TIME ZONE 'UTC') - interval '15 hours')::date;
    v_end := ((p_until AT TIME ZONE 'UTC') + interval '15 hours')::date;
    WHILE v_day <= v_end LOOP
        v_y := extract(year FROM v_day);
        v_m := extract(month FROM v_day);
        IF v_year IS NOT NULL AND NOT v_y = ANY (v_year) THEN
            EXIT WHEN v_y > v_year[cardinality(v_year)];
            v_day := make_date(v_y + 1, 1, 1);
            CONTINUE;
        END IF;
        IF NOT v_m = ANY (v_mon) THEN
            v_day := (date_trunc('month', v_day) + interval '1 month')::date;
            CONTINUE;
        END IF;
        v_dd := extract(day FROM v_day);
        v_w := extract(dow FROM v_day);
        v_last_day := extract(day FROM date_trunc('month', v_day) + interval '1 month - 1 day');
        v_dom_ok := v_dd = ANY (v_dom) OR (v_dom_last AND v_dd = v_last_day);
        v_dow_ok := CASE WHEN v_special
                         THEN v_w * 10 + (v_dd + 6) / 7 = ANY (v_nth)
                              OR (v_w = ANY (v_last_dow) AND v_dd + 7 > v_last_day)
                         ELSE v_w = ANY (v_dow) END;
        -- Both restricted: a day matching either (classic cron); otherwise the restricted one.
        v_day_ok := CASE WHEN v_dom_all AND v_dow_all THEN true
                         WHEN v_dom_all THEN v_dow_ok
                         WHEN v_dow_all THEN v_dom_ok
                         ELSE v_dom_ok OR v_dow_ok END;
        IF v_day_ok THEN
            v_midnight := v_day::timestamp;
            -- The zone's offsets around the day; all equal: no change, wall - offset is the instant.
            v_lo := (v_midnight - interval '15 hours') AT TIME ZONE 'UTC';
            v_hi := (v_midnight + interval '37 hours') AT TIME ZONE 'UTC';
            v_o1 := (v_lo AT TIME ZONE p_timezone) - (v_lo AT TIME ZONE 'UTC');
            v_o2 := ((v_midnight + interval '12 hours') AT TIME ZONE 'UTC' AT TIME ZONE p_timezone) - (v_midnight + interval '12 hours');
            v_o3 := (v_hi AT TIME ZONE p_timezone) - (v_hi AT TIME ZONE 'UTC');
            v_omin := least(v_o1, v_o2, v_o3);
            v_omax := greatest(v_o1, v_o2, v_o3);
            -- Enough fires, and none of this day can come before the last one kept: done.
            EXIT WHEN cardinality(v_out) >= p_n AND (v_midnight - v_omax) AT TIME ZONE 'UTC' > v_out[p_n];
            EXIT WHEN (v_midnight - v_omax) AT TIME ZONE 'UTC' > p_until;
            v_gap_end := NULL;
            IF v_o1 < v_o3 THEN
                -- A spring-forward change near this day: the first instant on the later offset
                -- (where a fixed-time job's missing wall times fire), to the second, found as
                -- poller/cron_days.py gap_end finds it.
                WHILE v_hi - v_lo > interval '1 second' LOOP
                    v_mid := date_trunc('second', v_lo + (v_hi - v_lo) / 2);
                    IF v_mid <= v_lo THEN
                        v_mid := v_lo + interval '1 second';
                    END IF;
                    IF (v_mid AT TIME ZONE p_timezone) - (v_mid AT TIME ZONE 'UTC') = v_o3 THEN
                        v_hi := v_mid;
                    ELSE
                        v_lo := v_mid;
                    END IF;
                END LOOP;
                v_gap_end := v_hi;
            END IF;
            FOREACH v_h IN ARRAY v_hour LOOP
                v_wall := v_midnight + make_interval(hours => v_h);
                CONTINUE WHEN (v_wall + interval '1 hour' - v_omin) AT TIME ZONE 'UTC' <= p_after;
                EXIT WHEN (v_wall - v_omax) AT TIME ZONE 'UTC' > p_until;
                EXIT WHEN cardinality(v_out) >= p_n AND (v_wall - v_omax) AT TIME ZONE 'UTC' > v_out[p_n];
                IF v_omin = v_omax THEN
                    SELECT array_agg(c.t ORDER BY c.t) INTO v_got FROM (
                        SELECT (v_wall + make_interval(mins => mi, secs => s) - v_o1) AT TIME ZONE 'UTC' AS t
                        FROM unnest(v_min) AS mi, unnest(v_sec) AS s
                    ) c WHERE c.t > p_after AND c.t <= p_until;
                ELSE
                    SELECT array_agg(DISTINCT t ORDER BY t) INTO v_got FROM (
                        -- a fold's wall time: both instants, or the first for a fixed-time job;
                        -- a gap's: none, or the gap's end for a fixed-time job
                        SELECT CASE WHEN cardinality(x.ok) = 0 THEN CASE WHEN v_fixed THEN ARRAY[v_gap_end] END
                                    WHEN v_fixed THEN x.ok[1:1] ELSE x.ok END AS fires
                        FROM unnest(v_min) AS mi, unnest(v_sec) AS s
                        CROSS JOIN LATERAL (SELECT v_wall + make_interval(mins => mi, secs => s) AS wall) w
                        -- the wall time's real instants: those whose local time it is
                        CROSS JOIN LATERAL (
                            SELECT coalesce(array_agg(DISTINCT i.t ORDER BY i.t), '{}') AS ok
                            FROM unnest(ARRAY[v_o1, v_o2, v_o3]) AS o(off)
                            CROSS JOIN LATERAL (SELECT (w.wall - o.off) AT TIME ZONE 'UTC' AS t) i
                            WHERE (i.t AT TIME ZONE p_timezone) = w.wall
                        ) x
                    ) c CROSS JOIN LATERAL unnest(c.fires) AS t
                    WHERE t > p_after AND t <= p_until;
                END IF;
                IF v_got IS NOT NULL THEN
                    v_out := v_out || v_got;
                    IF cardinality(v_out) >= p_n THEN
                        -- keep the p_n earliest (a fold orders some fires out of wall order)
                        v_out := (SELECT array_agg(DISTINCT t ORDER BY t) FROM unnest(v_out) t);
                        v_out := v_out[1:p_n];
                    END IF;
                END IF;
            END LOOP;
        END IF;
        v_day := v_day + 1;
    END LOOP;
    RETURN (SELECT coalesce(array_agg(DISTINCT t ORDER BY t), '{}') FROM unnest(v_out) t)[1:p_n];
END
$$;

COMMENT ON FUNCTION cronbox.cron_fires(text, text, timestamp with time zone, integer, timestamp with time zone) IS
'Internal: the first p_n fires of a cron expression in a time zone strictly after p_after and at most p_until, ascending, by the poller''s rule (poller/cron.py: wall-clock times, fixed-time jobs fire once per wall time, others per real instant). Pure; work bounded by p_n and p_until.';

ALTER FUNCTION cronbox.cron_fires(text, text, timestamp with time zone, integer, timestamp with time zone) OWNER TO cronbox_owner;
REVOKE ALL ON FUNCTION cronbox.cron_fires(text, text, timestamp with time zone, integer, timestamp with time zone) FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
