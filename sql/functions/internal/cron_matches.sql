-- cronbox.cron_matches(p_cron, p_wall): whether a local wall-clock time matches a cron
-- expression to the minute (the seconds field is not looked at): minute, hour, month, year,
-- and the day rule of cronbox.cron_fires (both day fields restricted: either matches; `L`,
-- `d#n`, `Ld` as croniter reads them). Exclusion calendars use it (cronbox.excluded_by).
-- Pure.
CREATE OR REPLACE FUNCTION cronbox.cron_matches(p_cron text, p_wall timestamp)
RETURNS boolean
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_f text[] := string_to_array(cronbox.normalize_cron(p_cron), ' ');
    v_dd integer := extract(day FROM p_wall);
    v_w integer := extract(dow FROM p_wall);
    v_last_day integer := extract(day FROM date_trunc('month', p_wall) + interval '1 month - 1 day');
    v_item text;
    v_dom_ok boolean;
    v_dow_ok boolean := false;
BEGIN
    IF NOT (extract(minute FROM p_wall)::integer = ANY (cronbox.cron_values(v_f[2], 0, 59))
            AND extract(hour FROM p_wall)::integer = ANY (cronbox.cron_values(v_f[3], 0, 23))
            AND extract(month FROM p_wall)::integer = ANY (cronbox.cron_values(v_f[5], 1, 12))
            AND (v_f[7] = '*' OR extract(year FROM p_wall)::integer = ANY (cronbox.cron_values(v_f[7], 1970, 2099)))) THEN
        RETURN false;
    END IF;
    v_dom_ok := v_dd = ANY (cronbox.cron_values(array_to_string(array_remove(string_to_array(v_f[4], ','), 'L'), ','), 1, 31))
                OR ('L' = ANY (string_to_array(v_f[4], ',')) AND v_dd = v_last_day);
    IF v_f[6] ~ '[#L]' THEN
        FOREACH v_item IN ARRAY string_to_array(v_f[6], ',') LOOP
            v_dow_ok := v_dow_ok OR CASE
                WHEN v_item LIKE 'L%' THEN v_w = substr(v_item, 2)::integer % 7 AND v_dd + 7 > v_last_day
                ELSE v_w = split_part(v_item, '#', 1)::integer % 7 AND (v_dd + 6) / 7 = split_part(v_item, '#', 2)::integer END;
        END LOOP;
        RETURN v_dow_ok;  -- croniter reads only the # and L days here (a day-of-month is refused upstream)
    END IF;
    v_dow_ok := v_w = ANY (cronbox.cron_values(v_f[6], 0, 7));
    RETURN CASE WHEN v_f[4] = '*' AND v_f[6] = '*' THEN true
                WHEN v_f[4] = '*' THEN v_dow_ok
                WHEN v_f[6] = '*' THEN v_dom_ok
                ELSE v_dom_ok OR v_dow_ok END;
END
$$;

COMMENT ON FUNCTION cronbox.cron_matches(text, timestamp without time zone) IS
'Internal: whether a local wall-clock time matches a cron expression to the minute (seconds not looked at), by the day rule of cronbox.cron_fires. Used by exclusion calendars. Pure.';

ALTER FUNCTION cronbox.cron_matches(text, timestamp without time zone) OWNER TO cronbox_owner;
REVOKE ALL ON FUNCTION cronbox.cron_matches(text, timestamp without time zone) FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
