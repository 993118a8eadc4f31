-- cronbox.cron_values(p_field, p_low, p_high): the values one field of a normalized cron
-- expression (cronbox.normalize_cron) stands for, sorted and distinct, as croniter (the
-- poller's parser) expands them: `*` and `*/n` count from the field's lowest value, `a/n`
-- runs to its highest (6 for day-of-week, where 7 means Sunday and becomes 0), `a-b/n` from
-- a to b. Items `L`, `d#n` and `Ld` are not values: the caller reads them. Pure.
CREATE OR REPLACE FUNCTION cronbox.cron_values(p_field text, p_low integer, p_high integer)
RETURNS integer[]
LANGUAGE sql IMMUTABLE PARALLEL SAFE
SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT coalesce(array_agg(DISTINCT CASE WHEN p_high = 7 AND v = 7 THEN 0 ELSE v END
                              ORDER BY CASE WHEN p_high = 7 AND v = 7 THEN 0 ELSE v END), '{}')
    FROM regexp_split_to_table(p_field, ',') AS i(item)
    CROSS JOIN LATERAL regexp_match(i.item, '^(\*|[0-9]+)(?:-([0-9]+))?(?:/([0-9]+))?$') AS m
    CROSS JOIN LATERAL generate_series(
        CASE WHEN m[1] = '*' THEN p_low ELSE m[1]::integer END,
        CASE WHEN m[2] IS NOT NULL THEN m[2]::integer
             WHEN m[1] = '*' OR m[3] IS NOT NULL THEN CASE WHEN p_high = 7 AND m[1] <> '*' THEN 6 ELSE p_high END
             ELSE m[1]::integer END,
        coalesce(m[3]::integer, 1)) AS v
    WHERE m IS NOT NULL
$$;

COMMENT ON FUNCTION cronbox.cron_values(text, integer, integer) IS
'Internal: the values one field of a normalized cron expression stands for, sorted and distinct, expanded as croniter expands them (*/n from the lowest value, a/n to the highest, day-of-week 7 = 0). L, d#n and Ld items are left to the caller. Pure.';

ALTER FUNCTION cronbox.cron_values(text, integer, integer) OWNER TO cronbox_owner;
REVOKE ALL ON FUNCTION cronbox.cron_values(text, integer, integer) FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
