-- cronbox.schedule_fire_rate(p_kind, p_every, p_cron, p_timezone, p_now): a schedule's nominal
-- fires per second, what it counts against its owner's max_fires_per_second quota. every: one
-- per interval (fixed delay too: at most that often). cron: its next 100 fires after p_now,
-- 99 / the seconds between the first and the last (a job that fires in bursts counts at its
-- bursts' density over that span; fewer than 2 fires in 10 years: 0). at and after: 0 (a
-- one-off fires once; an after-job fires at most as often as its upstreams succeed).
-- Pure (cronbox.cron_fires for cron); reads no table.
CREATE OR REPLACE FUNCTION cronbox.schedule_fire_rate(
    p_kind text, p_every interval, p_cron text, p_timezone text, p_now timestamptz
) RETURNS double precision
LANGUAGE plpgsql STABLE
SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_fires timestamptz[];
BEGIN
    IF p_kind = 'every' THEN
        RETURN 1.0 / greatest(extract(epoch FROM p_every)::double precision, 1.0);
    ELSIF p_kind = 'cron' THEN
        v_fires := cronbox.cron_fires(p_cron, p_timezone, p_now, 100, p_now + interval '10 years');
        IF cardinality(v_fires) < 2 THEN
            RETURN 0;
        END IF;
        RETURN (cardinality(v_fires) - 1)
               / greatest(extract(epoch FROM v_fires[cardinality(v_fires)] - v_fires[1])::double precision, 1.0);
    END IF;
    RETURN 0;
END
$$;

COMMENT ON FUNCTION cronbox.schedule_fire_rate(text, interval, text, text, timestamp with time zone) IS
'Internal: a schedule''s nominal fires per second (every: 1/every; cron: over its next 100 fires; at, after: 0), counted against its owner''s max_fires_per_second.';

ALTER FUNCTION cronbox.schedule_fire_rate(text, interval, text, text, timestamp with time zone) OWNER TO cronbox_owner;
REVOKE ALL ON FUNCTION cronbox.schedule_fire_rate(text, interval, text, text, timestamp with time zone) FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
