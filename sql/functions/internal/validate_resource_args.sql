-- cronbox.validate_resource_args(p_needs, p_notify): the checks of schedule()'s `needs` and
-- `notify`, made before anything is written. needs: NULL or a JSON object of 1 to 16 pools
-- (names as queue names), each a whole number of units from 1 to 1,000,000,000 and no more
-- than the pool exists for (P0002 for a pool nobody created with cronbox.set_pool). notify:
-- NULL or 1 to 20 distinct addresses, each `mailto:` one address (at most 254 characters) or
-- an http(s) URL of at most 2,000 characters, no control characters or spaces. Reads
-- cronbox.pool; takes no lock, writes nothing.
CREATE OR REPLACE FUNCTION cronbox.validate_resource_args(p_needs jsonb, p_notify text[]) RETURNS void
LANGUAGE plpgsql STABLE
SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_key text;
    v_val jsonb;
    v_missing text;
BEGIN
    IF p_needs IS NOT NULL THEN
        IF jsonb_typeof(p_needs) <> 'object' THEN
            RAISE EXCEPTION 'needs: must be a JSON object of pool names and units, such as {"gpu": 8}, got %',
                jsonb_typeof(p_needs) USING ERRCODE = 'invalid_parameter_value';
        END IF;
        IF (SELECT count(*) FROM jsonb_object_keys(p_needs)) NOT BETWEEN 1 AND 16 THEN
            RAISE EXCEPTION 'needs: must name 1 to 16 pools, got %', (SELECT count(*) FROM jsonb_object_keys(p_needs))
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
        FOR v_key, v_val IN SELECT e.key, e.value FROM jsonb_each(p_needs) e ORDER BY e.key LOOP
            IF v_key !~ '^[A-Za-z0-9][A-Za-z0-9_.:-]{0,99}$' THEN
                RAISE EXCEPTION 'needs: pool names must be 1 to 100 characters of letters, digits, _ . : - (starting with a letter or digit), got %',
                    quote_literal(left(v_key, 120)) USING ERRCODE = 'invalid_parameter_value';
            END IF;
            IF jsonb_typeof(v_val) = 'null' THEN
                RAISE EXCEPTION 'needs: units of pool % must not be null', v_key USING ERRCODE = 'null_value_not_allowed';
            END IF;
            IF jsonb_typeof(v_val) <> 'number' OR v_val::text !~ '^[0-9]{1,10}$'
               OR v_val::text::bigint NOT BETWEEN 1 AND 1000000000 THEN
                RAISE EXCEPTION 'needs: units of pool % must be a whole number from 1 to 1000000000, got %',
                    v_key, left(v_val::text, 40) USING ERRCODE = 'invalid_parameter_value';
            END IF;
        END LOOP;
        SELECT string_agg(quote_literal(k), ', ' ORDER BY k) INTO v_missing
        FROM jsonb_object_keys(p_needs) AS k
        WHERE NOT EXISTS (SELECT 1 FROM cronbox.pool p WHERE p.name = k);
        IF v_missing IS NOT NULL THEN
            RAISE EXCEPTION 'needs: no pool named % (create it with cronbox.set_pool)', v_missing
                USING ERRCODE = 'no_data_found';
        END IF;
    END IF;

    IF p_notify IS NOT NULL THEN
        IF array_position(p_notify, NULL) IS NOT NULL THEN
            RAISE EXCEPTION 'notify: must not contain NULL' USING ERRCODE = 'null_value_not_allowed';
        END IF;
        IF cardinality(p_notify) NOT BETWEEN 1 AND 20 THEN
            RAISE EXCEPTION 'notify: must list 1 to 20 addresses (NULL: none), got %', cardinality(p_notify)
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
        SELECT min(quote_literal(left(a, 120))) INTO v_missing
        FROM unnest(p_notify) AS a
        WHERE a ~ '[[:cntrl:][:space:]]'
           OR NOT (a ~* '^mailto:[^@<>",;:]{1,64}@[A-Za-z0-9-]+(\.[A-Za-z0-9-]+)*$' AND length(a) <= 261
                   OR a ~* '^https?://[^/?#]+' AND length(a) <= 2000);
        IF v_missing IS NOT NULL THEN
            RAISE EXCEPTION 'notify: each address must be mailto:user@host or an http(s) URL of at most 2000 characters, got %',
                v_missing USING ERRCODE = 'invalid_parameter_value';
        END IF;
        IF (SELECT count(DISTINCT lower(a)) FROM unnest(p_notify) AS a) <> cardinality(p_notify) THEN
            RAISE EXCEPTION 'notify: lists an address twice' USING ERRCODE = 'invalid_parameter_value';
        END IF;
    END IF;
END
$$;

COMMENT ON FUNCTION cronbox.validate_resource_args(jsonb, text[]) IS
'Internal: the checks of schedule()''s needs (a JSON object of 1 to 16 existing pools, each 1 to 1000000000 units) and notify (1 to 20 distinct mailto: or http(s) addresses). Raises 22004, 22023 or P0002 (unknown pool) with a message starting with the field name.';

ALTER FUNCTION cronbox.validate_resource_args(jsonb, text[]) OWNER TO cronbox_owner;
REVOKE ALL ON FUNCTION cronbox.validate_resource_args(jsonb, text[]) FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
