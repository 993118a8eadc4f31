-- Internal: the body of cronbox.create_calendar, with the time as its last parameter p_now.
-- The public cronbox.create_calendar passes now(); no cronbox role may execute this one
-- (tests call it as the owner or a superuser to fix the clock).
-- cronbox.create_calendar_at(name, dates, ranges, crons, timezone, p_now): create an exclusion
-- calendar, or replace the contents of the caller's calendar of that name. Validates every
-- argument before writing. When an existing calendar changes, the jobs that use it get their
-- pending futures recomputed (cronbox.recompute_job_futures, under their row locks). An
-- identical call is a no-op. Returns the calendar id.
CREATE OR REPLACE FUNCTION cronbox.create_calendar_at(
    name     text,
    dates    date[]      DEFAULT NULL,
    ranges   daterange[] DEFAULT NULL,
    crons    text[]      DEFAULT NULL,
    timezone text        DEFAULT 'UTC',
    p_now    timestamptz DEFAULT now()
) RETURNS bigint
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_old cronbox.calendar;
    v_dates date[];
    v_ranges daterange[];
    v_crons text[];
    v_id bigint;
    v_cron text;
    v_hint text;
BEGIN
    PERFORM cronbox.assert_not_null('name', create_calendar_at.name);
    IF create_calendar_at.name !~ '^[A-Za-z0-9][A-Za-z0-9_.:-]{0,99}$' THEN
        RAISE EXCEPTION 'name: calendar names are 1 to 100 letters, digits, _ . : - starting with a letter or digit, got %',
            quote_literal(left(create_calendar_at.name, 120)) USING ERRCODE = 'invalid_parameter_value';
    END IF;
    PERFORM cronbox.assert_not_null('timezone', create_calendar_at.timezone);
    IF NOT EXISTS (SELECT 1 FROM cronbox.time_zone z WHERE z.name = create_calendar_at.timezone)
       AND NOT EXISTS (SELECT 1 FROM pg_catalog.pg_timezone_names z WHERE z.name = create_calendar_at.timezone) THEN
        SELECT ' (did you mean ' || quote_literal(min(z.name)) || '?)' INTO v_hint
        FROM cronbox.time_zone z WHERE lower(z.name) = lower(create_calendar_at.timezone);
        RAISE EXCEPTION 'timezone: unknown time zone %; use an IANA name such as Europe/Berlin',
            quote_literal(left(create_calendar_at.timezone, 120)) || coalesce(v_hint, '')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    -- dates: at most 10,000, no NULL, 1970-01-01 .. 2199-12-31; stored sorted and distinct.
    IF cardinality(create_calendar_at.dates) > 10000 THEN
        RAISE EXCEPTION 'dates: at most 10000 dates, got %', cardinality(create_calendar_at.dates)
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF array_position(create_calendar_at.dates, NULL) IS NOT NULL THEN
        RAISE EXCEPTION 'dates: must not contain NULL' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    IF EXISTS (SELECT 1 FROM unnest(create_calendar_at.dates) d WHERE d NOT BETWEEN date '1970-01-01' AND date '2199-12-31') THEN
        RAISE EXCEPTION 'dates: each date must be from 1970-01-01 to 2199-12-31'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    v_dates := ARRAY(SELECT DISTINCT d FROM unnest(create_calendar_at.dates) d ORDER BY d);
    -- ranges: at most 1,000, no NULL, not empty, both bounds given, inside the same years.
    IF cardinality(create_calendar_at.ranges) > 1000 THEN
        RAISE EXCEPTION 'ranges: at most 1000 date ranges, got %', cardinality(create_calendar_at.ranges)
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF array_position(create_calendar_at.ranges, NULL) IS NOT NULL THEN
        RAISE EXCEPTION 'ranges: must not contain NULL' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    IF EXISTS (SELECT 1 FROM unnest(create_calendar_at.ranges) r
               WHERE isempty(r) OR lower_inf(r) OR upper_inf(r)
                  OR lower(r) < date '1970-01-01' OR upper(r) > date '2200-01-01') THEN
        RAISE EXCEPTION 'ranges: each range must be non-empty with both bounds from 1970-01-01 to 2199-12-31, e.g. ''[2030-12-24,2030-12-26]'''
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    v_ranges := ARRAY(SELECT DISTINCT r FROM unnest(create_calendar_at.ranges) r ORDER BY r);
    -- crons: at most 100 valid expressions (stored in their normal form).
    IF cardinality(create_calendar_at.crons) > 100 THEN
        RAISE EXCEPTION 'crons: at most 100 expressions, got %', cardinality(create_calendar_at.crons)
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF array_position(create_calendar_at.crons, NULL) IS NOT NULL THEN
        RAISE EXCEPTION 'crons: must not contain NULL' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    v_crons := '{}';
    FOREACH v_cron IN ARRAY coalesce(create_calendar_at.crons, '{}') LOOP
        v_cron := cronbox.normalize_cron(v_cron);  -- 22023 'cron: ...' naming the field
        IF split_part(v_cron, ' ', 6) ~ '[#L]' AND split_part(v_cron, ' ', 4) <> '*' THEN
            RAISE EXCEPTION 'crons: a day-of-month restriction together with # or L days of the week is not supported, got "%"', v_cron
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
        IF NOT v_cron = ANY (v_crons) THEN
            v_crons := v_crons || v_cron;
        END IF;
    END LOOP;

    -- FOR NO KEY UPDATE (what a non-key UPDATE takes): it does not conflict with the FOR KEY
    -- SHARE that schedule(exclude => ...) takes through job_calendar's foreign key while it holds
    -- its job's lock, so the two cannot deadlock when this then takes the jobs' locks.
    SELECT * INTO v_old FROM cronbox.calendar c WHERE c.name = create_calendar_at.name FOR NO KEY UPDATE;
    IF NOT FOUND THEN
        IF EXISTS (SELECT 1 FROM cronbox.calendar c WHERE c.name = create_calendar_at.name) IS NOT TRUE THEN
            INSERT INTO cronbox.calendar AS c (name, timezone, dates, ranges, crons, created_at, updated_at)
            VALUES (create_calendar_at.name, create_calendar_at.timezone, v_dates, v_ranges, v_crons, p_now, p_now)
            ON CONFLICT ON CONSTRAINT calendar_name_unique DO NOTHING
            RETURNING c.calendar_id INTO v_id;
        END IF;
        IF v_id IS NULL THEN
            -- the name is taken by a calendar the caller cannot see (row security)
            RAISE EXCEPTION 'name: the calendar name % is taken', quote_literal(create_calendar_at.name)
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
        RETURN v_id;
    END IF;
    IF (v_old.timezone, v_old.dates, v_old.ranges, v_old.crons)
       IS NOT DISTINCT FROM (create_calendar_at.timezone, v_dates, v_ranges, v_crons) THEN
        RETURN v_old.calendar_id;
    END IF;
    UPDATE cronbox.calendar c SET timezone = create_calendar_at.timezone, dates = v_dates,
        ranges = v_ranges, crons = v_crons, updated_at = p_now
    WHERE c.calendar_id = v_old.calendar_id;
    PERFORM cronbox.recompute_job_futures(
        ARRAY(SELECT jc.job_id FROM cronbox.job_calendar jc WHERE jc.calendar_id = v_old.calendar_id),
        'cancelled: exclusion calendar ' || quote_literal(v_old.name) || ' changed before its fire time', p_now);
    RETURN v_old.calendar_id;
END
$$;

COMMENT ON FUNCTION cronbox.create_calendar_at(text, date[], daterange[], text[], text, timestamp with time zone) IS
'Internal (no cronbox role may execute it): the body of cronbox.create_calendar(text, date[], daterange[], text[], text) with the time as p_now; tests use it to fix the clock. Creates an exclusion calendar or replaces the contents of the caller''s calendar of that name (the jobs using it get their pending futures recomputed). Returns the calendar id.';

ALTER FUNCTION cronbox.create_calendar_at(text, date[], daterange[], text[], text, timestamp with time zone) OWNER TO cronbox_owner;
REVOKE ALL ON FUNCTION cronbox.create_calendar_at(text, date[], daterange[], text[], text, timestamp with time zone) FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
