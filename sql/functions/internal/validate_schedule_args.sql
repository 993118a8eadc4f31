-- cronbox.validate_schedule_args(...): every check cronbox.schedule() makes before writing.
-- Raises 22004 (null_value_not_allowed) for a NULL where a value is required and 22023
-- (invalid_parameter_value) for a bad value, with a message that starts with the field's
-- name. Cron expressions are checked by cronbox.normalize_cron (same SQLSTATEs). Takes no
-- lock and writes nothing; reads only cronbox.time_zone (and pg_timezone_names as fallback).
CREATE OR REPLACE FUNCTION cronbox.validate_schedule_args(
    p_name text, p_cron text, p_every interval, p_at timestamptz, p_payload jsonb,
    p_queue text, p_timezone text, p_priority integer, p_overlap text, p_on_error text,
    p_max_attempts integer, p_retry_delay interval, p_retry_max_delay interval,
    p_timeout interval, p_catchup text, p_catchup_window interval, p_jitter interval,
    p_starts_at timestamptz, p_ends_at timestamptz, p_after text[], p_every_mode text
) RETURNS void
LANGUAGE plpgsql STABLE
SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_given text[] := array_remove(ARRAY[
        CASE WHEN p_cron IS NOT NULL THEN 'cron' END,
        CASE WHEN p_every IS NOT NULL THEN 'every' END,
        CASE WHEN p_at IS NOT NULL THEN 'at' END,
        CASE WHEN p_after IS NOT NULL THEN 'after' END], NULL);
    v_payload_bytes integer;
    v_hint text;
    v_fields text[];
    v_months integer[];
    v_item text;
    v_lo timestamptz := timestamptz '1970-01-01 00:00:00+00';
    v_hi timestamptz := now() + interval '100 years';
BEGIN
    -- name: the key users address the job by; the table allows 1..200 characters.
    IF p_name IS NULL THEN
        RAISE EXCEPTION 'name: must not be NULL' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    IF length(p_name) > 200 THEN
        RAISE EXCEPTION 'name: must be at most 200 characters, got %', length(p_name)
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF btrim(p_name) = '' OR p_name <> btrim(p_name, E' \t\r\n') OR p_name ~ '[[:cntrl:]]' THEN
        RAISE EXCEPTION 'name: must be non-blank text without control characters or surrounding spaces, got %',
            quote_literal(p_name) USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_name ~* '^(cronbox[.:_-]|_cronbox)' THEN
        RAISE EXCEPTION 'name: names starting with ''cronbox.'', ''cronbox:'', ''cronbox_'', ''cronbox-'' or ''_cronbox'' are reserved, got %',
            quote_literal(left(p_name, 120)) USING ERRCODE = 'invalid_parameter_value';
    END IF;

    -- when: exactly one way of saying it.
    IF cardinality(v_given) <> 1 THEN
        RAISE EXCEPTION 'schedule: give exactly one of cron, every, at, after; got %',
            CASE WHEN cardinality(v_given) = 0 THEN 'none' ELSE array_to_string(v_given, ' and ') END
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_cron IS NOT NULL THEN
        -- raises 22023 naming the cron field; then a static feasibility check of the normal
        -- form "sec min hour dom mon dow year": a year list wholly in the past, or days of the
        -- month that none of the listed months has (31 February), would never fire.
        v_fields := regexp_split_to_array(cronbox.normalize_cron(p_cron), ' ');
        IF v_fields[7] <> '*' AND v_fields[7] !~ '/' AND (
            SELECT max(y::integer) FROM regexp_split_to_table(v_fields[7], '[,-]') AS y WHERE y ~ '^[0-9]{1,4}$'
        ) < extract(year FROM now()) THEN
            RAISE EXCEPTION 'cron: every year listed (%) is in the past: the expression would never fire', v_fields[7]
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
    IF p_every IS NOT NULL THEN
        IF p_every <= interval '0' THEN
            RAISE EXCEPTION 'every: must be a positive interval, got %', p_every
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
        IF extract(month FROM p_every) <> 0 OR extract(year FROM p_every) <> 0 THEN
            RAISE EXCEPTION 'every: months and years have no fixed length, got %; use cron for calendar schedules', p_every
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
        IF p_every < interval '1 second' THEN
            RAISE EXCEPTION 'every: must be at least 1 second, got %', p_every
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
        IF p_every > interval '366 days' THEN
            RAISE EXCEPTION 'every: must be at most 366 days, got %; use cron for rarer schedules', p_every
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
    END IF;
    PERFORM cronbox.assert_one_of('every_mode', p_every_mode, ARRAY['fixed_rate', 'fixed_delay']);
    IF p_every_mode = 'fixed_delay' AND p_every IS NULL THEN
        RAISE EXCEPTION 'every_mode: fixed_delay needs every'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_at IS NOT NULL AND (NOT isfinite(p_at) OR p_at NOT BETWEEN v_lo AND v_hi) THEN
        RAISE EXCEPTION 'at: must be a finite time from 1970-01-01 UTC to 100 years from now, got %', p_at
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_after IS NOT NULL THEN
        IF cardinality(p_after) = 0 THEN
            RAISE EXCEPTION 'after: must list at least one upstream job' USING ERRCODE = 'invalid_parameter_value';
        END IF;
        IF array_position(p_after, NULL) IS NOT NULL THEN
            RAISE EXCEPTION 'after: must not contain NULL' USING ERRCODE = 'null_value_not_allowed';
        END IF;
        IF cardinality(p_after) > 100 THEN
            RAISE EXCEPTION 'after: must list at most 100 upstream jobs, got %', cardinality(p_after)
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
        IF EXISTS (SELECT 1 FROM unnest(p_after) u WHERE btrim(u) = '' OR length(u) > 200) THEN
            RAISE EXCEPTION 'after: job names must be 1 to 200 characters'
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
        IF p_name = ANY (p_after) THEN
            RAISE EXCEPTION 'after: a job cannot run after itself (%)', quote_literal(p_name)
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
        IF (SELECT count(DISTINCT u) FROM unnest(p_after) u) <> cardinality(p_after) THEN
            RAISE EXCEPTION 'after: lists a job twice' USING ERRCODE = 'invalid_parameter_value';
        END IF;
    END IF;

    -- where: time zone, queue, payload.
    PERFORM cronbox.assert_not_null('timezone', p_timezone);
    IF NOT EXISTS (SELECT 1 FROM cronbox.time_zone z WHERE z.name = p_timezone)
       AND NOT EXISTS (SELECT 1 FROM pg_catalog.pg_timezone_names z WHERE z.name = p_timezone) THEN
        SELECT ' (did you mean ' || quote_literal(min(z.name)) || '?)' INTO v_hint
        FROM cronbox.time_zone z WHERE lower(z.name) = lower(p_timezone);
        RAISE EXCEPTION 'timezone: unknown time zone %; use an IANA name such as Europe/Berlin',
            quote_literal(p_timezone) || coalesce(v_hint, '')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    PERFORM cronbox.assert_not_null('queue', p_queue);
    IF p_queue !~ '^[A-Za-z0-9][A-Za-z0-9_.:-]{0,99}$' THEN
        RAISE EXCEPTION 'queue: must be 1 to 100 characters of letters, digits, _ . : - (starting with a letter or digit), got %',
            quote_literal(left(p_queue, 120)) USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_queue ~* '^(cronbox[.:_-]|_cronbox)' THEN
        RAISE EXCEPTION 'queue: queue names starting with ''cronbox.'' (such as cronbox.notifications) or ''_cronbox'' are reserved, got %',
            quote_literal(p_queue) USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_payload IS NULL THEN
        RAISE EXCEPTION 'payload: must not be NULL (use ''{}'')' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    IF jsonb_typeof(p_payload) <> 'object' THEN
        RAISE EXCEPTION 'payload: must be a JSON object, got %', jsonb_typeof(p_payload)
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    v_payload_bytes := octet_length(p_payload::text);
    IF v_payload_bytes > cronbox.max_payload_bytes() THEN
        RAISE EXCEPTION 'payload: must be at most % bytes as JSON text (cronbox.max_payload_bytes), got %',
            cronbox.max_payload_bytes(), v_payload_bytes USING ERRCODE = 'invalid_parameter_value';
    END IF;

    -- how: run policies.
    PERFORM cronbox.assert_not_null('priority', p_priority);
    IF p_priority NOT BETWEEN -32768 AND 32767 THEN
        RAISE EXCEPTION 'priority: must be between -32768 and 32767, got %', p_priority
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    PERFORM cronbox.assert_one_of('overlap', p_overlap, ARRAY['skip', 'buffer_one', 'buffer_all', 'allow', 'cancel_other']);
    PERFORM cronbox.assert_one_of('on_error', p_on_error, ARRAY['retry_schedule', 'retry_soon', 'pause']);
    PERFORM cronbox.assert_not_null('max_attempts', p_max_attempts);
    IF p_max_attempts NOT BETWEEN 1 AND 1000 THEN
        RAISE EXCEPTION 'max_attempts: must be between 1 and 1000, got %', p_max_attempts
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    PERFORM cronbox.assert_positive('retry_delay', p_retry_delay);
    PERFORM cronbox.assert_at_most('retry_delay', p_retry_delay, interval '30 days');
    PERFORM cronbox.assert_not_null('retry_max_delay', p_retry_max_delay);
    PERFORM cronbox.assert_at_most('retry_max_delay', p_retry_max_delay, interval '30 days');
    IF p_retry_max_delay < p_retry_delay THEN
        RAISE EXCEPTION 'retry_max_delay: must be at least retry_delay (% < %)', p_retry_max_delay, p_retry_delay
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    PERFORM cronbox.assert_positive('timeout', p_timeout);
    PERFORM cronbox.assert_at_most('timeout', p_timeout, interval '30 days');
    PERFORM cronbox.assert_one_of('catchup', p_catchup, ARRAY['skip', 'latest', 'all']);
    PERFORM cronbox.assert_positive('catchup_window', p_catchup_window);
    PERFORM cronbox.assert_at_most('catchup_window', p_catchup_window, interval '366 days');
    IF p_jitter IS NULL THEN
        RAISE EXCEPTION 'jitter: must not be NULL (use ''0'')' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    IF p_jitter < interval '0' THEN
        RAISE EXCEPTION 'jitter: must not be negative, got %', p_jitter
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    PERFORM cronbox.assert_at_most('jitter', p_jitter, interval '1 day');

    -- window: starts_at .. ends_at.
    IF p_starts_at IS NOT NULL AND (NOT isfinite(p_starts_at) OR p_starts_at NOT BETWEEN v_lo AND v_hi) THEN
        RAISE EXCEPTION 'starts_at: must be a finite time from 1970-01-01 UTC to 100 years from now, got %', p_starts_at
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_ends_at IS NOT NULL AND (NOT isfinite(p_ends_at) OR p_ends_at NOT BETWEEN v_lo AND v_hi) THEN
        RAISE EXCEPTION 'ends_at: must be a finite time from 1970-01-01 UTC to 100 years from now, got %', p_ends_at
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_ends_at <= p_starts_at THEN
        RAISE EXCEPTION 'ends_at: must be after starts_at (% <= %)', p_ends_at, p_starts_at
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
END
$$;

COMMENT ON FUNCTION cronbox.validate_schedule_args(text,text,interval,timestamp with time zone,jsonb,text,text,integer,text,text,integer,interval,interval,interval,text,interval,interval,timestamp with time zone,timestamp with time zone,text[],text) IS
'Internal: every argument check of cronbox.schedule(), made before anything is written. Raises 22004 (NULL where a value is required) or 22023 (bad value) with a message that starts with the field name. Bounds: docs/sql.md.';

ALTER FUNCTION cronbox.validate_schedule_args(text,text,interval,timestamp with time zone,jsonb,text,text,integer,text,text,integer,interval,interval,interval,text,interval,interval,timestamp with time zone,timestamp with time zone,text[],text) OWNER TO cronbox_owner;
REVOKE ALL ON FUNCTION cronbox.validate_schedule_args(text,text,interval,timestamp with time zone,jsonb,text,text,integer,text,text,integer,interval,interval,interval,text,interval,interval,timestamp with time zone,timestamp with time zone,text[],text) FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
