-- cronbox.resolve_calendars(p_exclude): the ids of the exclusion calendars named in p_exclude,
-- the `exclude` argument of schedule() and preview(): one name, or several separated by
-- commas ('holidays, maintenance'; an array literal '{holidays,maintenance}' reads the same).
-- NULL or '' means none ('{}'). At most 20 names; each must be a calendar the caller can see
-- (row security): 22023 for a malformed list, P0002 'exclude: no calendar named ...'
-- otherwise. Reads cronbox.calendar by name; no lock.
CREATE OR REPLACE FUNCTION cronbox.resolve_calendars(p_exclude text)
RETURNS bigint[]
LANGUAGE plpgsql STABLE
SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_names text[];
    v_name text;
    v_ids bigint[] := '{}';
    v_id bigint;
BEGIN
    IF p_exclude IS NULL OR btrim(p_exclude, E' \t{}') = '' THEN
        RETURN v_ids;
    END IF;
    IF length(p_exclude) > 4000 THEN
        RAISE EXCEPTION 'exclude: must be at most 4000 characters, got %', length(p_exclude)
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    v_names := ARRAY(SELECT btrim(x, E' \t"') FROM regexp_split_to_table(btrim(p_exclude, E' \t{}'), ',') AS x);
    IF cardinality(v_names) > 20 THEN
        RAISE EXCEPTION 'exclude: at most 20 calendars, got %', cardinality(v_names)
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    FOREACH v_name IN ARRAY v_names LOOP
        IF v_name !~ '^[A-Za-z0-9][A-Za-z0-9_.:-]{0,99}$' THEN
            RAISE EXCEPTION 'exclude: calendar names are 1 to 100 letters, digits, _ . : - separated by commas, got %',
                quote_literal(left(v_name, 120)) USING ERRCODE = 'invalid_parameter_value';
        END IF;
        SELECT c.calendar_id INTO v_id FROM cronbox.calendar c WHERE c.name = v_name;
        IF NOT FOUND THEN
            RAISE EXCEPTION 'exclude: no calendar named %', quote_literal(v_name) USING ERRCODE = 'no_data_found';
        END IF;
        IF NOT v_id = ANY (v_ids) THEN
            v_ids := v_ids || v_id;
        END IF;
    END LOOP;
    RETURN v_ids;
END
$$;

COMMENT ON FUNCTION cronbox.resolve_calendars(text) IS
'Internal: the ids of the exclusion calendars named in an exclude argument (one name or a comma-separated list, at most 20); 22023 malformed, P0002 unknown or not visible to the caller.';

ALTER FUNCTION cronbox.resolve_calendars(text) OWNER TO cronbox_owner;
REVOKE ALL ON FUNCTION cronbox.resolve_calendars(text) FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
