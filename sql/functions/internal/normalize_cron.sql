-- cronbox.normalize_cron(p_expr): validate a cron expression in cronbox's dialect and return its
-- normal form, always 7 fields "sec min hour dom mon dow year" (names as numbers), which is what
-- is stored and what the poller's croniter reads. poller/cron_dialect.py normalize() mirrors it message
-- for message. Bad input: SQLSTATE 22023 naming the field and item; NULL: 22004.
-- Pure: reads no table, takes no lock; CREATE OR REPLACE, so re-applying the file is a no-op.
CREATE OR REPLACE FUNCTION cronbox.normalize_cron(p_expr text)
RETURNS text
LANGUAGE plpgsql
IMMUTABLE
PARALLEL SAFE
SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $function$
DECLARE
    v_names constant text[] := ARRAY['second', 'minute', 'hour', 'day-of-month', 'month',
                                     'day-of-week', 'year'];
    v_low constant int[] := ARRAY[0, 0, 0, 1, 1, 0, 1970];
    v_high constant int[] := ARRAY[59, 59, 23, 31, 12, 7, 2099];
    v_months constant text[] := ARRAY['JAN', 'FEB', 'MAR', 'APR', 'MAY', 'JUN', 'JUL', 'AUG',
                                      'SEP', 'OCT', 'NOV', 'DEC'];
    v_days constant text[] := ARRAY['SUN', 'MON', 'TUE', 'WED', 'THU', 'FRI', 'SAT'];
    -- ASCII only, as in Python: upper()/lower() follow the database locale.
    v_lc constant text := 'abcdefghijklmnopqrstuvwxyz';
    v_uc constant text := 'ABCDEFGHIJKLMNOPQRSTUVWXYZ';
    v_ws constant text := E' \t\n\r\f\x0B';
    v_text text;
    v_fields text[];
    v_out text[] := ARRAY[]::text[];
    v_fi int;
    v_field text;
    v_items text[];
    v_res text[];
    v_item text;
    v_up text;
    v_parts text[];
    v_kind text;
    v_tokens text[];
    v_step_token text;
    v_token text;
    v_value int;
    v_vals int[];
    v_step int;
    v_span int;
    v_special int;
    v_prefix text;
    v_suffix text;
BEGIN
    IF p_expr IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = 'null_value_not_allowed',
            MESSAGE = 'cron: expression must not be NULL';
    END IF;
    v_text := pg_catalog.btrim(p_expr, v_ws);
    IF v_text = '' THEN
        RAISE EXCEPTION USING ERRCODE = 'invalid_parameter_value',
            MESSAGE = 'cron: expression is empty';
    END IF;

    IF pg_catalog.left(v_text, 1) = '@' THEN
        CASE pg_catalog.translate(v_text, v_uc, v_lc)
            WHEN '@yearly', '@annually' THEN RETURN '0 0 0 1 1 * *';
            WHEN '@monthly' THEN RETURN '0 0 0 1 * * *';
            WHEN '@weekly' THEN RETURN '0 0 0 * * 0 *';
            WHEN '@daily', '@midnight' THEN RETURN '0 0 0 * * * *';
            WHEN '@hourly' THEN RETURN '0 0 * * * * *';
            ELSE
                RAISE EXCEPTION USING ERRCODE = 'invalid_parameter_value',
                    MESSAGE = 'cron: unsupported macro "' || v_text || '"; use @yearly, @annually, '
                              || '@monthly, @weekly, @daily, @midnight or @hourly';
        END CASE;
    END IF;

    v_suffix := ' in "' || p_expr || '"';
    v_fields := pg_catalog.regexp_split_to_array(v_text, '[' || v_ws || ']+');
    IF pg_catalog.cardinality(v_fields) NOT IN (5, 6, 7) THEN
        RAISE EXCEPTION USING ERRCODE = 'invalid_parameter_value',
            MESSAGE = 'cron: expected 5, 6 or 7 fields, got '
                      || pg_catalog.cardinality(v_fields) || v_suffix;
    END IF;
    -- 5 fields: seconds default to 0; 5 or 6 fields: year defaults to *.
    IF pg_catalog.cardinality(v_fields) = 5 THEN
        v_fields := pg_catalog.array_prepend('0', v_fields);
    END IF;
    IF pg_catalog.cardinality(v_fields) = 6 THEN
        v_fields := pg_catalog.array_append(v_fields, '*');
    END IF;

    FOR v_fi IN 1..7 LOOP
        v_field := v_fields[v_fi];
        v_prefix := 'cron: ' || v_names[v_fi] || ' field "';
        v_span := v_high[v_fi] - v_low[v_fi] + 1;
        IF v_field = '?' AND v_fi IN (4, 6) THEN
            v_out := pg_catalog.array_append(v_out, '*');
            CONTINUE;
        END IF;
        v_items := pg_catalog.string_to_array(v_field, ',');
        IF '' = ANY (v_items) THEN
            RAISE EXCEPTION USING ERRCODE = 'invalid_parameter_value',
                MESSAGE = v_prefix || v_field || '" has an empty list item' || v_suffix;
        END IF;
        v_res := ARRAY[]::text[];
        v_special := 0;

        FOREACH v_item IN ARRAY v_items LOOP
            v_up := pg_catalog.translate(v_item, v_lc, v_uc);
            v_tokens := ARRAY[]::text[];
            v_step_token := NULL;
            -- Classify the item; v_tokens are the values (low, high) still to resolve.
            IF v_fi = 4 AND v_up = 'L' THEN
                v_kind := 'last_dom';
            ELSIF v_fi = 6 AND v_up ~ '^([0-9]+|[A-Z]+)#([0-9]+)$' THEN
                v_parts := pg_catalog.regexp_match(v_up, '^([0-9]+|[A-Z]+)#([0-9]+)$');
                v_kind := 'nth';
                v_tokens := ARRAY[v_parts[1]];
            ELSIF v_fi = 6 AND v_up ~ '^(L([0-9]+|[A-Z]+)|([0-9]+|[A-Z]+)L)$' THEN
                v_parts := pg_catalog.regexp_match(v_up, '^(L([0-9]+|[A-Z]+)|([0-9]+|[A-Z]+)L)$');
                v_kind := 'last_dow';
                v_tokens := ARRAY[coalesce(v_parts[2], v_parts[3])];
            ELSE
                v_parts := pg_catalog.regexp_match(
                    v_up, '^([*]|[0-9]+|[A-Z]+)(-([0-9]+|[A-Z]+))?(/([0-9]+))?$');
                IF v_parts IS NULL OR (v_parts[1] = '*' AND v_parts[3] IS NOT NULL) THEN
                    RAISE EXCEPTION USING ERRCODE = 'invalid_parameter_value',
                        MESSAGE = v_prefix || v_item || '" is not valid' || v_suffix;
                END IF;
                v_kind := CASE WHEN v_parts[1] = '*' THEN 'star' ELSE 'plain' END;
                IF v_kind = 'plain' THEN
                    v_tokens := ARRAY[v_parts[1]];
                    IF v_parts[3] IS NOT NULL THEN
                        v_tokens := pg_catalog.array_append(v_tokens, v_parts[3]);
                    END IF;
                END IF;
                v_step_token := v_parts[5];
            END IF;

            -- Resolve values in order (low, then high): number or name, then range.
            v_vals := ARRAY[]::int[];
            FOREACH v_token IN ARRAY v_tokens LOOP
                IF v_token ~ '^[0-9]' THEN
                    v_value := CASE WHEN pg_catalog.length(pg_catalog.ltrim(v_token, '0')) > 9
                                    THEN 2147483647 ELSE v_token::int END;
                ELSE
                    v_value := CASE v_fi
                        WHEN 5 THEN pg_catalog.array_position(v_months, v_token)
                        WHEN 6 THEN pg_catalog.array_position(v_days, v_token) - 1
                    END;
                    IF v_value IS NULL THEN
                        RAISE EXCEPTION USING ERRCODE = 'invalid_parameter_value',
                            MESSAGE = v_prefix || v_item || '" is not valid' || v_suffix;
                    END IF;
                END IF;
                IF v_value < v_low[v_fi] OR v_value > v_high[v_fi] THEN
                    RAISE EXCEPTION USING ERRCODE = 'invalid_parameter_value',
                        MESSAGE = v_prefix || v_item || '" is out of range ' || v_low[v_fi] || '-'
                                  || v_high[v_fi] || v_suffix;
                END IF;
                v_vals := pg_catalog.array_append(v_vals, v_value);
            END LOOP;

            IF v_kind = 'nth' THEN
                IF pg_catalog.length(pg_catalog.ltrim(v_parts[2], '0')) > 1
                   OR v_parts[2]::int NOT BETWEEN 1 AND 5 THEN
                    RAISE EXCEPTION USING ERRCODE = 'invalid_parameter_value',
                        MESSAGE = v_prefix || v_item || '" has an occurrence out of range 1-5'
                                  || v_suffix;
                END IF;
                v_res := pg_catalog.array_append(v_res, v_vals[1] || '#' || v_parts[2]::int);
                v_special := v_special + 1;
                CONTINUE;
            ELSIF v_kind = 'last_dow' THEN
                v_res := pg_catalog.array_append(v_res, 'L' || v_vals[1]);
                v_special := v_special + 1;
                CONTINUE;
            ELSIF v_kind = 'last_dom' THEN
                v_res := pg_catalog.array_append(v_res, 'L');
                CONTINUE;
            END IF;

            v_step := NULL;
            IF v_step_token IS NOT NULL THEN
                v_step := CASE WHEN pg_catalog.length(pg_catalog.ltrim(v_step_token, '0')) > 9
                               THEN 2147483647 ELSE v_step_token::int END;
                IF v_step < 1 OR v_step > v_span THEN
                    RAISE EXCEPTION USING ERRCODE = 'invalid_parameter_value',
                        MESSAGE = v_prefix || v_item || '" has a step out of range 1-' || v_span
                                  || v_suffix;
                END IF;
            END IF;

            IF v_kind = 'star' THEN
                v_res := pg_catalog.array_append(v_res, '*' || coalesce('/' || v_step, ''));
            ELSIF pg_catalog.cardinality(v_vals) = 1 THEN
                -- croniter reads a/n as a-6/n in day-of-week, where 7 is not a start but Sunday.
                IF v_step IS NOT NULL AND v_fi = 6 AND v_vals[1] = 7 THEN
                    v_vals[1] := 0;
                END IF;
                v_res := pg_catalog.array_append(
                    v_res, v_vals[1] || coalesce('/' || v_step, ''));
            ELSE
                IF v_fi = 6 AND v_vals[2] = 0 AND v_vals[1] > 0 THEN
                    v_vals[2] := 7;  -- FRI-SUN
                END IF;
                IF v_vals[2] < v_vals[1] THEN
                    RAISE EXCEPTION USING ERRCODE = 'invalid_parameter_value',
                        MESSAGE = v_prefix || v_item || '" is a reversed range' || v_suffix;
                END IF;
                -- croniter would read a-a as the whole field.
                v_res := pg_catalog.array_append(v_res, CASE
                    WHEN v_vals[1] = v_vals[2] THEN v_vals[1]::text
                    ELSE v_vals[1] || '-' || v_vals[2] || coalesce('/' || v_step, '')
                END);
            END IF;
        END LOOP;

        -- croniter cannot combine # or L days with plain days in one field.
        IF v_special > 0 AND v_special < pg_catalog.cardinality(v_res) THEN
            RAISE EXCEPTION USING ERRCODE = 'invalid_parameter_value',
                MESSAGE = v_prefix || v_field || '" mixes # or L days with other days' || v_suffix;
        END IF;
        v_out := pg_catalog.array_append(v_out, pg_catalog.array_to_string(v_res, ','));
    END LOOP;

    RETURN pg_catalog.array_to_string(v_out, ' ');
END
$function$;

COMMENT ON FUNCTION cronbox.normalize_cron(text) IS
'cronbox.normalize_cron(p_expr): validate a cron expression in cronbox''s dialect and return its
normal form, always 7 fields "sec min hour dom mon dow year" (names as numbers), which is what
is stored and what the poller''s croniter reads. poller/cron_dialect.py normalize() mirrors it message
for message. Bad input: SQLSTATE 22023 naming the field and item; NULL: 22004.
Pure: reads no table, takes no lock; CREATE OR REPLACE, so re-applying the file is a no-op.';

ALTER FUNCTION cronbox.normalize_cron(text) OWNER TO cronbox_owner;
REVOKE ALL ON FUNCTION cronbox.normalize_cron(text) FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
