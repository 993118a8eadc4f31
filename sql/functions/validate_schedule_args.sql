-- cronbox.validate_schedule_args(...): every check cronbox.schedule() makes before writing.
-- Raises 22004 (null_value_not_allowed) or 22023 (invalid_parameter_value) with a message
-- that starts with the offending field's name. Reads nothing, writes nothing.
CREATE OR REPLACE FUNCTION cronbox.validate_schedule_args(
    p_name text, p_cron text, p_every interval, p_at timestamptz, p_payload jsonb,
    p_queue text, p_timezone text, p_priority integer, p_overlap text, p_on_error text,
    p_max_attempts integer, p_retry_delay interval, p_retry_max_delay interval,
    p_timeout interval, p_catchup text, p_catchup_window interval, p_jitter interval,
    p_starts_at timestamptz, p_ends_at timestamptz, p_after text[], p_every_mode text
) RETURNS void
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_given integer := (p_cron IS NOT NULL)::int + (p_every IS NOT NULL)::int
                     + (p_at IS NOT NULL)::int + (p_after IS NOT NULL)::int;
BEGIN
    IF p_name IS NULL THEN
        RAISE EXCEPTION 'name: must not be NULL' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    IF length(btrim(p_name)) = 0 OR length(p_name) > 200 THEN
        RAISE EXCEPTION 'name: must be 1 to 200 characters, not blank, got %', quote_literal(left(p_name, 40))
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF v_given <> 1 THEN
        RAISE EXCEPTION 'schedule: give exactly one of cron, every, at, after (got %)', v_given
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_every IS NOT NULL AND p_every <= interval '0' THEN
        RAISE EXCEPTION 'every: must be a positive interval, got %', p_every
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_timezone IS NULL THEN
        RAISE EXCEPTION 'timezone: must not be NULL' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_timezone_names WHERE name = p_timezone) THEN
        RAISE EXCEPTION 'timezone: unknown time zone %', quote_literal(p_timezone)
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_overlap IS NULL OR p_overlap NOT IN ('skip', 'buffer_one', 'buffer_all', 'allow', 'cancel_other') THEN
        RAISE EXCEPTION 'overlap: must be one of skip, buffer_one, buffer_all, allow, cancel_other, got %', coalesce(quote_literal(p_overlap), 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_on_error IS NULL OR p_on_error NOT IN ('retry_schedule', 'retry_soon', 'pause') THEN
        RAISE EXCEPTION 'on_error: must be one of retry_schedule, retry_soon, pause, got %', coalesce(quote_literal(p_on_error), 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_catchup IS NULL OR p_catchup NOT IN ('skip', 'latest', 'all') THEN
        RAISE EXCEPTION 'catchup: must be one of skip, latest, all, got %', coalesce(quote_literal(p_catchup), 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_every_mode IS NULL OR p_every_mode NOT IN ('fixed_rate', 'fixed_delay') THEN
        RAISE EXCEPTION 'every_mode: must be fixed_rate or fixed_delay, got %', coalesce(quote_literal(p_every_mode), 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_max_attempts IS NULL OR p_max_attempts < 1 THEN
        RAISE EXCEPTION 'max_attempts: must be at least 1, got %', coalesce(p_max_attempts::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_timeout IS NULL OR p_timeout <= interval '0' THEN
        RAISE EXCEPTION 'timeout: must be a positive interval, got %', coalesce(p_timeout::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_queue IS NULL OR length(p_queue) NOT BETWEEN 1 AND 100 THEN
        RAISE EXCEPTION 'queue: must be 1 to 100 characters, got %', coalesce(quote_literal(p_queue), 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_payload IS NULL OR jsonb_typeof(p_payload) <> 'object' THEN
        RAISE EXCEPTION 'payload: must be a JSON object, got %', coalesce(jsonb_typeof(p_payload), 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_starts_at IS NOT NULL AND p_ends_at IS NOT NULL AND p_ends_at <= p_starts_at THEN
        RAISE EXCEPTION 'ends_at: must be after starts_at (% <= %)', p_ends_at, p_starts_at
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
END
$$;

COMMENT ON FUNCTION cronbox.validate_schedule_args(text, text, interval, timestamptz, jsonb, text, text, integer, text, text, integer, interval, interval, interval, text, interval, interval, timestamptz, timestamptz, text[], text) IS
'Internal: the argument checks of cronbox.schedule(); raises 22004/22023 naming the field.';
