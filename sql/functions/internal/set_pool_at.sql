-- Internal: the body of cronbox.set_pool, with the time as its last parameter p_now. The public
-- cronbox.set_pool passes now(); no cronbox role may execute this one (tests call it as the
-- owner or a superuser to fix the clock).
-- cronbox.set_pool_at(name, capacity, p_now): creates a resource pool or sets its capacity
-- (units: GPUs, IPs, licences). Lowered below the units in use, it takes effect as runs end
-- (they keep their units); raised, fires waiting for the pool are released at once, in
-- priority order, as many as the free units take. NULL capacity removes the pool, refused
-- (55000) while a schedule needs it. Locks the pool's row. Returns the units in use.
CREATE OR REPLACE FUNCTION cronbox.set_pool_at(
    name text,
    capacity integer,
    p_now timestamptz DEFAULT now()
) RETURNS bigint
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_users text;
BEGIN
    IF set_pool_at.name IS NULL THEN
        RAISE EXCEPTION 'name: must name a pool' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    IF set_pool_at.name !~ '^[A-Za-z0-9][A-Za-z0-9_.:-]{0,99}$' THEN
        RAISE EXCEPTION 'name: must be 1 to 100 characters of letters, digits, _ . : - (starting with a letter or digit), got %',
            quote_literal(left(set_pool_at.name, 120)) USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF set_pool_at.capacity NOT BETWEEN 0 AND 1000000000 THEN
        RAISE EXCEPTION 'capacity: must be 0 to 1000000000 units (NULL removes the pool), got %', set_pool_at.capacity
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF set_pool_at.capacity IS NULL THEN
        SELECT string_agg(quote_literal(j.name), ', ' ORDER BY j.name) INTO v_users
        FROM (SELECT j.name FROM cronbox.job j WHERE j.needs ? set_pool_at.name ORDER BY j.name LIMIT 5) j;
        IF v_users IS NOT NULL THEN
            RAISE EXCEPTION 'name: pool % is needed by schedule(s) %; change their needs first', quote_literal(set_pool_at.name), v_users
                USING ERRCODE = 'object_not_in_prerequisite_state';
        END IF;
        DELETE FROM cronbox.pool p WHERE p.name = set_pool_at.name;
        PERFORM cronbox.release_futures(ARRAY(
            SELECT f.future_id FROM cronbox.job_future f
            WHERE f.hold = 'pool' AND f.hold_queue = set_pool_at.name));
        RETURN NULL;
    END IF;
    INSERT INTO cronbox.pool AS p (name, capacity, updated_at, updated_by)
    VALUES (set_pool_at.name, set_pool_at.capacity, p_now, cronbox.caller())
    ON CONFLICT ON CONSTRAINT pool_pkey
    DO UPDATE SET capacity = excluded.capacity, updated_at = excluded.updated_at, updated_by = excluded.updated_by;
    -- waiting fires into the free units (a raise starts them at once)
    PERFORM cronbox.release_pool_units(ARRAY[set_pool_at.name], ARRAY[0::bigint], p_now);
    RETURN (SELECT p.in_use FROM cronbox.pool p WHERE p.name = set_pool_at.name);
END
$$;

COMMENT ON FUNCTION cronbox.set_pool_at(text, integer, timestamp with time zone) IS
'Internal (no cronbox role may execute it): the body of cronbox.set_pool(text, integer) with the time as p_now; tests use it to fix the clock. Creates a resource pool or sets its capacity; NULL removes it (refused while a schedule needs it). Returns the units in use.';

ALTER FUNCTION cronbox.set_pool_at(text, integer, timestamp with time zone) OWNER TO cronbox_owner;
REVOKE ALL ON FUNCTION cronbox.set_pool_at(text, integer, timestamp with time zone) FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
