-- cronbox.cron_day_rule(p_dom, p_dow): whether each day field of a normalized cron expression
-- (cronbox.normalize_cron) leaves the days unrestricted, as croniter (the poller's parser)
-- reads them; the one rule behind cronbox.cron_fires (preview, next_fires) and
-- cronbox.excluded_by (calendars). A field with a `*` item (`*`, `*,L`, `*,*`) is
-- unrestricted. A field listing every value reads as `*` too when the other field's text
-- contains a `*` (`*/2` included), entries counted as croniter counts them, `L` as one:
-- `1-30,L` is 31 entries (all), `1-31,L` 32 (not); a day of week with `#` or `L` items never.
-- When both are restricted a day matching either matches (classic cron); when one is, that
-- one decides. Pure.
CREATE OR REPLACE FUNCTION cronbox.cron_day_rule(p_dom text, p_dow text, OUT dom_all boolean, OUT dow_all boolean)
LANGUAGE sql IMMUTABLE PARALLEL SAFE
SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT '*' = ANY (string_to_array(p_dom, ','))
           OR (cardinality(cronbox.cron_values(array_to_string(array_remove(string_to_array(p_dom, ','), 'L'), ','), 1, 31))
               + CASE WHEN 'L' = ANY (string_to_array(p_dom, ',')) THEN 1 ELSE 0 END = 31
               AND strpos(p_dow, '*') > 0),
           '*' = ANY (string_to_array(p_dow, ','))
           OR (p_dow !~ '[#L]' AND cardinality(cronbox.cron_values(p_dow, 0, 7)) = 7 AND strpos(p_dom, '*') > 0)
$$;

COMMENT ON FUNCTION cronbox.cron_day_rule(text, text) IS
'Internal: whether the day-of-month and day-of-week fields of a normalized cron expression leave the days unrestricted, as croniter reads them (a * item; a field listing every value when the other one contains a *); the rule shared by cron_fires and excluded_by.';

ALTER FUNCTION cronbox.cron_day_rule(text, text) OWNER TO cronbox_owner;
REVOKE ALL ON FUNCTION cronbox.cron_day_rule(text, text) FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
