-- cronbox.validate_schedule_args(args): every check cronbox.schedule() makes before writing.
-- args: the call's arguments as a jsonb object keyed by parameter name (cronbox.schedule_at
-- builds it). The options declared by cronbox.schedule_options() are checked from their
-- declared bounds in one loop; name, the time expression, time zone, queue, payload, the window
-- and the checks between two options are written out here. Raises 22004
-- (null_value_not_allowed) for a NULL where a value is required and 22023
-- (invalid_parameter_value) for a bad value, with a message that starts with the field's
-- name. Cron expressions are checked by cronbox.normalize_cron (same SQLSTATEs). Takes no
-- lock and writes nothing; reads only cronbox.time_zone (and pg_timezone_names as fallback).
CREATE OR REPLACE FUNCTION cronbox.validate_schedule_args(p_args jsonb) RETURNS void
LANGUAGE plpgsql STABLE
SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    -- The arguments typed as the columns they go to.
    v_job cronbox.job := jsonb_populate_record(NULL::cronbox.job, p_args);
    v_name text := v_job.name;
    v_cron text := v_job.cron;
    v_every interval := v_job.every;
    v_at timestamptz := v_job.at;
    v_after text[] := v_job.after;
    v_timezone text := v_job.timezone;
    v_queue text := v_job.queue;
    v_payload jsonb := v_job.payload;
    v_starts_at timestamptz := v_job.starts_at;
    v_ends_at timestamptz := v_job.ends_at;
    v_given text[] := array_remove(ARRAY[
        CASE WHEN v_cron IS NOT NULL THEN 'cron' END,
        CASE WHEN v_every IS NOT NULL THEN 'every' END,
        CASE WHEN v_at IS NOT NULL THEN 'at' END,
        CASE WHEN v_after IS NOT NULL THEN 'after' END], NULL);
    v_payload_bytes integer;
    v_hint text;
    v_fields text[];
    v_months integer[];
    v_item text;
    v_lo timestamptz := timestamptz '1970-01-01 00:00:00+00';
    v_hi timestamptz := now() + interval '100 years';
    v_opt record;
    v_text text;
    v_num numeric;
    v_iv interval;
BEGIN
    -- name: the key users address the job by; the table allows 1..200 characters.
    IF v_name IS NULL THEN
        RAISE EXCEPTION 'name: must not be NULL' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    IF length(v_name) > 200 THEN
        RAISE EXCEPTION 'name: must be at most 200 characters, got %', length(v_name)
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF btrim(v_name) = '' OR v_name <> btrim(v_name, E' \t\r\n') OR v_name ~ '[[:cntrl:]]' THEN
        RAISE EXCEPTION 'name: must be non-blank text without control characters or surrounding spaces, got %',
            quote_literal(v_name) USING ERRCODE = 'invalid_parameter_value';
    END IF;
    -- Invisible formatting characters (bidi overrides and isolates, zero-width ones) make one
    -- name look like another in every listing: refused, named by their code point.
    IF v_name ~ E'[\u00ad\u061c\u180e\u200b-\u200f\u202a-\u202e\u2060-\u2064\u2066-\u2069\ufeff]' THEN
        RAISE EXCEPTION 'name: must not contain invisible formatting characters (bidi controls, zero-width), got U+%',
            upper(to_hex(ascii(substring(v_name FROM E'[\u00ad\u061c\u180e\u200b-\u200f\u202a-\u202e\u2060-\u2064\u2066-\u2069\ufeff]')))) USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF v_name ~* '^(cronbox[.:_-]|_cronbox)' THEN
        RAISE EXCEPTION 'name: names starting with ''cronbox.'', ''cronbox:'', ''cronbox_'', ''cronbox-'' or ''_cronbox'' are reserved, got %',
            quote_literal(left(v_name, 120)) USING ERRCODE = 'invalid_parameter_value';
    END IF;

    -- when: exactly one way of saying it.
    IF cardinality(v_given) <> 1 THEN
        RAISE EXCEPTION 'schedule: give exactly one of cron, every, at, after; got %',
            CASE WHEN cardinality(v_given) = 0 THEN 'none' ELSE array_to_string(v_given, ' and ') END
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF v_cron IS NOT NULL THEN
        -- raises 22023 naming the cron field; then a static feasibility check of the normal
        -- form "sec min hour dom mon dow year": a year list wholly in the past, a day of the
        -- month beside # or L days of the week, or days of the month that none of the listed
        -- months has (31 February).
        v_fields := regexp_split_to_array(cronbox.normalize_cron(v_cron), ' ');
        IF v_fields[7] <> '*' AND v_fields[7] !~ '/' AND (
            SELECT max(y::integer) FROM regexp_split_to_table(v_fields[7], '[,-]') AS y WHERE y ~ '^[0-9]{1,4}$'
        ) < extract(year FROM now()) THEN
            RAISE EXCEPTION 'cron: every year listed (%) is in the past: the expression would never fire', v_fields[7]
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
        -- croniter (the poller) ignores a day-of-month restriction next to `#`/`L` days of the
        -- week (`0 0 15 * 5#3` fires on every third Friday) or finds no date at all (`0 0 1 *
        -- 5#3`): refused, as preview refuses it, rather than fired on days nobody asked for.
        IF v_fields[6] ~ '[#L]' AND v_fields[4] <> '*' THEN
            RAISE EXCEPTION 'cron: a day-of-month restriction (%) together with # or L days of the week (%) is not supported: use * for the day of the month', v_fields[4], v_fields[6]
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
        IF v_fields[6] = '*' AND v_fields[4] ~ '^[0-9]+(,[0-9]+)*$' AND v_fields[5] ~ '^(\*|[0-9]+(-[0-9]+)?(,[0-9]+(-[0-9]+)?)*)$' THEN
            IF v_fields[5] = '*' THEN
                v_months := ARRAY[1,2,3,4,5,6,7,8,9,10,11,12];
            ELSE
                v_months := '{}';
                FOREACH v_item IN ARRAY string_to_array(v_fields[5], ',') LOOP
                    v_months := v_months || ARRAY(SELECT generate_series(split_part(v_item, '-', 1)::integer,
                        coalesce(nullif(split_part(v_item, '-', 2), ''), split_part(v_item, '-', 1))::integer));
                END LOOP;
            END IF;
            IF NOT EXISTS (
                SELECT 1 FROM unnest(string_to_array(v_fields[4], ',')::integer[]) AS d(day),
                              unnest(v_months) AS m(month)
                WHERE d.day <= (ARRAY[31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31])[m.month]
            ) THEN
                RAISE EXCEPTION 'cron: no listed month has day % of the month: the expression would never fire', v_fields[4]
                    USING ERRCODE = 'invalid_parameter_value';
            END IF;
        END IF;
    END IF;
    IF v_every IS NOT NULL THEN
        IF v_every <= interval '0' THEN
            RAISE EXCEPTION 'every: must be a positive interval, got %', v_every
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
        IF extract(month FROM v_every) <> 0 OR extract(year FROM v_every) <> 0 THEN
            RAISE EXCEPTION 'every: months and years have no fixed length, got %; use cron for calendar schedules', v_every
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
        IF v_every < interval '1 second' THEN
            RAISE EXCEPTION 'every: must be at least 1 second, got %', v_every
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
        IF v_every > interval '366 days' THEN
            RAISE EXCEPTION 'every: must be at most 366 days, got %; use cron for rarer schedules', v_every
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
    END IF;
    IF v_at IS NOT NULL AND (NOT isfinite(v_at) OR v_at NOT BETWEEN v_lo AND v_hi) THEN
        RAISE EXCEPTION 'at: must be a finite time from 1970-01-01 UTC to 100 years from now, got %', v_at
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF v_after IS NOT NULL THEN
        IF cardinality(v_after) = 0 THEN
            RAISE EXCEPTION 'after: must list at least one upstream job' USING ERRCODE = 'invalid_parameter_value';
        END IF;
        IF array_position(v_after, NULL) IS NOT NULL THEN
            RAISE EXCEPTION 'after: must not contain NULL' USING ERRCODE = 'null_value_not_allowed';
        END IF;
        IF cardinality(v_after) > 100 THEN
            RAISE EXCEPTION 'after: must list at most 100 upstream jobs, got %', cardinality(v_after)
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
        IF EXISTS (SELECT 1 FROM unnest(v_after) u WHERE btrim(u) = '' OR length(u) > 200) THEN
            RAISE EXCEPTION 'after: job names must be 1 to 200 characters'
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
        IF v_name = ANY (v_after) THEN
            RAISE EXCEPTION 'after: a job cannot run after itself (%)', quote_literal(v_name)
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
        IF (SELECT count(DISTINCT u) FROM unnest(v_after) u) <> cardinality(v_after) THEN
            RAISE EXCEPTION 'after: lists a job twice' USING ERRCODE = 'invalid_parameter_value';
        END IF;
    END IF;

    -- where: time zone, queue, payload.
    PERFORM cronbox.assert_not_null('timezone', v_timezone);
    IF NOT EXISTS (SELECT 1 FROM cronbox.time_zone z WHERE z.name = v_timezone)
       AND NOT EXISTS (SELECT 1 FROM pg_catalog.pg_timezone_names z WHERE z.name = v_timezone) THEN
        SELECT ' (did you mean ' || quote_literal(min(z.name)) || '?)' INTO v_hint
        FROM cronbox.time_zone z WHERE lower(z.name) = lower(v_timezone);
        RAISE EXCEPTION 'timezone: unknown time zone %; use an IANA name such as Europe/Berlin',
            quote_literal(v_timezone) || coalesce(v_hint, '')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    PERFORM cronbox.assert_not_null('queue', v_queue);
    IF v_queue !~ '^[A-Za-z0-9][A-Za-z0-9_.:-]{0,99}$' THEN
        RAISE EXCEPTION 'queue: must be 1 to 100 characters of letters, digits, _ . : - (starting with a letter or digit), got %',
            quote_literal(left(v_queue, 120)) USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF v_queue ~* '^(cronbox[.:_-]|_cronbox)' THEN
        RAISE EXCEPTION 'queue: queue names starting with ''cronbox.'' (such as cronbox.notifications) or ''_cronbox'' are reserved, got %',
            quote_literal(v_queue) USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF v_payload IS NULL THEN
        RAISE EXCEPTION 'payload: must not be NULL (use ''{}'')' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    IF jsonb_typeof(v_payload) <> 'object' THEN
        RAISE EXCEPTION 'payload: must be a JSON object, got %', jsonb_typeof(v_payload)
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    v_payload_bytes := octet_length(v_payload::text);
    IF v_payload_bytes > cronbox.max_payload_bytes() THEN
        RAISE EXCEPTION 'payload: must be at most % bytes as JSON text (cronbox.max_payload_bytes), got %',
            cronbox.max_payload_bytes(), v_payload_bytes USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF cronbox.json_too_deep(v_payload) THEN
        RAISE EXCEPTION 'payload: must be nested at most 2048 levels deep (cronbox.json_too_deep)' USING ERRCODE = 'invalid_parameter_value';
    END IF;

    -- how: the declared options (cronbox.schedule_options), each against its bound.
    FOR v_opt IN SELECT * FROM cronbox.schedule_options() o WHERE o.check_kind <> 'custom' LOOP
        IF NOT p_args ? v_opt.option THEN
            RAISE EXCEPTION 'internal: option % is declared in cronbox.schedule_options() but not passed by cronbox.schedule_at', v_opt.option
                USING ERRCODE = 'internal_error';
        END IF;
        v_text := p_args ->> v_opt.option;
        IF v_text IS NULL THEN
            CONTINUE WHEN v_opt.default_value IS NULL;
            RAISE EXCEPTION '%: must not be NULL%', v_opt.option,
                CASE WHEN v_opt.null_hint THEN ' (use ' || quote_literal(v_opt.default_value) || ')' ELSE '' END
                USING ERRCODE = 'null_value_not_allowed';
        END IF;
        IF v_opt.check_kind = 'one_of' THEN
            PERFORM cronbox.assert_one_of(v_opt.option, v_text, v_opt.allowed);
        ELSIF v_opt.check_kind = 'range' AND v_opt.type = 'interval' THEN
            v_iv := v_text::interval;
            IF v_iv < v_opt.lower_bound::interval OR (v_opt.lower_exclusive AND v_iv = v_opt.lower_bound::interval) THEN
                RAISE EXCEPTION '%: %, got %', v_opt.option, CASE
                    WHEN v_opt.lower_bound::interval = interval '0' AND v_opt.lower_exclusive THEN 'must be a positive interval'
                    WHEN v_opt.lower_bound::interval = interval '0' THEN 'must not be negative'
                    WHEN v_opt.lower_exclusive THEN 'must be longer than ' || v_opt.lower_bound::interval
                    ELSE 'must be at least ' || v_opt.lower_bound::interval END, v_iv
                    USING ERRCODE = 'invalid_parameter_value';
            END IF;
            PERFORM cronbox.assert_at_most(v_opt.option, v_iv, v_opt.upper_bound::interval);
        ELSIF v_opt.check_kind = 'range' AND v_opt.type IN ('integer', 'bigint', 'smallint', 'numeric') THEN
            v_num := v_text::numeric;
            IF v_num < v_opt.lower_bound::numeric OR v_num > v_opt.upper_bound::numeric
               OR (v_opt.lower_exclusive AND v_num = v_opt.lower_bound::numeric) THEN
                RAISE EXCEPTION '%: must be %, got %', v_opt.option, CASE
                    WHEN v_opt.lower_bound IS NOT NULL AND v_opt.upper_bound IS NOT NULL AND NOT v_opt.lower_exclusive
                        THEN 'between ' || v_opt.lower_bound || ' and ' || v_opt.upper_bound
                    WHEN v_num > v_opt.upper_bound::numeric THEN 'at most ' || v_opt.upper_bound
                    WHEN v_opt.lower_exclusive THEN 'greater than ' || v_opt.lower_bound
                    ELSE 'at least ' || v_opt.lower_bound END, v_num
                    USING ERRCODE = 'invalid_parameter_value';
            END IF;
        ELSE
            RAISE EXCEPTION 'internal: option % has check % for type %, which cronbox.validate_schedule_args cannot check',
                v_opt.option, v_opt.check_kind, v_opt.type USING ERRCODE = 'internal_error';
        END IF;
    END LOOP;
    -- Checks between two options.
    IF v_job.every_mode = 'fixed_delay' AND v_every IS NULL THEN
        RAISE EXCEPTION 'every_mode: fixed_delay needs every'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    -- exclude: calendars the caller can see (cronbox.resolve_calendars: 22023 malformed, P0002
    -- unknown); a fixed-delay or `after` job would never fire again after an excluded fire.
    IF nullif(btrim(v_job.exclude, E' \t{}'), '') IS NOT NULL THEN
        IF v_job.every_mode = 'fixed_delay' OR v_after IS NOT NULL THEN
            RAISE EXCEPTION 'exclude: only cron, fixed-rate every and at schedules may use exclusion calendars, got %',
                CASE WHEN v_after IS NOT NULL THEN 'after' ELSE 'every_mode fixed_delay' END
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
        PERFORM cronbox.resolve_calendars(v_job.exclude);
    END IF;
    PERFORM cronbox.validate_resource_args(v_job.needs, v_job.notify);  -- resource pools, stakeholders
    IF v_job.retry_max_delay < v_job.retry_delay THEN
        RAISE EXCEPTION 'retry_max_delay: must be at least retry_delay (% < %)', v_job.retry_max_delay, v_job.retry_delay
            USING ERRCODE = 'invalid_parameter_value';
    END IF;

    -- window: starts_at .. ends_at.
    IF v_starts_at IS NOT NULL AND (NOT isfinite(v_starts_at) OR v_starts_at NOT BETWEEN v_lo AND v_hi) THEN
        RAISE EXCEPTION 'starts_at: must be a finite time from 1970-01-01 UTC to 100 years from now, got %', v_starts_at
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF v_ends_at IS NOT NULL AND (NOT isfinite(v_ends_at) OR v_ends_at NOT BETWEEN v_lo AND v_hi) THEN
        RAISE EXCEPTION 'ends_at: must be a finite time from 1970-01-01 UTC to 100 years from now, got %', v_ends_at
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF v_ends_at <= v_starts_at THEN
        RAISE EXCEPTION 'ends_at: must be after starts_at (% <= %)', v_ends_at, v_starts_at
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
END
$$;

COMMENT ON FUNCTION cronbox.validate_schedule_args(jsonb) IS
'Internal: every argument check of cronbox.schedule(), made before anything is written. Raises 22004 (NULL where a value is required) or 22023 (bad value) with a message that starts with the field name. Bounds: docs/sql.md.';

ALTER FUNCTION cronbox.validate_schedule_args(jsonb) OWNER TO cronbox_owner;
REVOKE ALL ON FUNCTION cronbox.validate_schedule_args(jsonb) FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
