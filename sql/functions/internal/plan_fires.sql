-- cronbox.plan_fires(kind, cron, timezone, every, anchor, at, starts_at, ends_at, after,
-- calendars, n, until): the first n fires of a definition strictly after `after`, at most
-- `until`, that the poller would store as futures: the same fire rule (cronbox.cron_fires
-- for cron; anchor + k * every for a fixed rate; the one time of `at`), the window
-- [starts_at, ends_at], and without the fires an exclusion calendar drops
-- (cronbox.excluded_by, the predicate cronbox.store_fires applies). Shared by preview and
-- next_fires. Work is bounded: at most 100,000 candidate fires are looked at (a calendar
-- that excludes everything ends the search there). Pure apart from reading the calendars.
CREATE OR REPLACE FUNCTION cronbox.plan_fires(
    p_kind      text,
    p_cron      text,
    p_timezone  text,
    p_every     interval,
    p_anchor    timestamptz,
    p_at        timestamptz,
    p_starts_at timestamptz,
    p_ends_at   timestamptz,
    p_after     timestamptz,
    p_calendars bigint[],
    p_n         integer,
    p_until     timestamptz
) RETURNS SETOF timestamptz
LANGUAGE plpgsql STABLE
SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
SET TimeZone = 'UTC'  -- timestamptz + interval must not follow the session's DST rules
AS $$
DECLARE
    c_candidates constant integer := 100000;
    v_after timestamptz := p_after;
    v_until timestamptz := least(p_until, p_ends_at);
    v_seen integer := 0;
    v_got integer := 0;
    v_batch timestamptz[];
    v_why text[];
    v_i integer;
    v_k bigint;
    v_size integer;
    v_step interval := make_interval(secs => extract(epoch FROM p_every));  -- elapsed time, as the poller
BEGIN
    IF p_n < 1 OR v_after IS NULL OR v_until IS NULL THEN
        RETURN;
    END IF;
    IF p_starts_at IS NOT NULL AND v_after < p_starts_at - interval '1 microsecond' THEN
        v_after := p_starts_at - interval '1 microsecond';  -- never a fire before the start
    END IF;
    WHILE v_got < p_n AND v_seen < c_candidates AND v_after < v_until LOOP
        -- first batch: a little more than asked; after exclusions, larger ones
        v_size := CASE WHEN v_seen = 0 THEN least(greatest(2 * p_n, 16), 1000) ELSE 1000 END;
        IF p_kind = 'cron' THEN
            v_batch := cronbox.cron_fires(p_cron, p_timezone, v_after, v_size, v_until);
        ELSIF p_kind = 'every' THEN
            -- fixed rate: anchor + k * every, k >= 0 (as poller/fires.py EveryFires)
            v_k := CASE WHEN v_after < p_anchor THEN 0
                        ELSE greatest(floor(extract(epoch FROM v_after - p_anchor) / extract(epoch FROM v_step))::bigint - 1, 0) END;
            v_batch := ARRAY(
                SELECT t FROM (SELECT p_anchor + (v_k + i) * v_step AS t FROM generate_series(0, v_size + 1) AS i) s
                WHERE s.t > v_after AND s.t <= v_until ORDER BY s.t LIMIT v_size);
        ELSIF p_kind = 'at' THEN
            v_batch := CASE WHEN p_at > v_after AND p_at <= v_until THEN ARRAY[p_at] ELSE '{}' END;
        ELSE
            RETURN;
        END IF;
        EXIT WHEN cardinality(v_batch) = 0;
        v_seen := v_seen + cardinality(v_batch);
        v_why := CASE WHEN cardinality(p_calendars) > 0 THEN cronbox.excluded_by(p_calendars, v_batch) ELSE '{}' END;
        FOR v_i IN 1 .. cardinality(v_batch) LOOP
            IF v_why[v_i] IS NULL THEN
                v_got := v_got + 1;
                RETURN NEXT v_batch[v_i];
                EXIT WHEN v_got >= p_n;
            END IF;
        END LOOP;
        EXIT WHEN cardinality(v_batch) < v_size OR p_kind = 'at';
        v_after := v_batch[cardinality(v_batch)];
    END LOOP;
END
$$;

COMMENT ON FUNCTION cronbox.plan_fires(text, text, text, interval, timestamp with time zone, timestamp with time zone, timestamp with time zone, timestamp with time zone, timestamp with time zone, bigint[], integer, timestamp with time zone) IS
'Internal: the first n fires of a schedule definition after a time, as the poller would store them (cron by cronbox.cron_fires, fixed rate anchor + k * every, at), inside [starts_at, ends_at], without the fires its exclusion calendars drop (cronbox.excluded_by). Shared by preview and next_fires; at most 100,000 candidates are examined.';

ALTER FUNCTION cronbox.plan_fires(text, text, text, interval, timestamp with time zone, timestamp with time zone, timestamp with time zone, timestamp with time zone, timestamp with time zone, bigint[], integer, timestamp with time zone) OWNER TO cronbox_owner;
REVOKE ALL ON FUNCTION cronbox.plan_fires(text, text, text, interval, timestamp with time zone, timestamp with time zone, timestamp with time zone, timestamp with time zone, timestamp with time zone, bigint[], integer, timestamp with time zone) FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
