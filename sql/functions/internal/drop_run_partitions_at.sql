-- Internal: the body of cronbox.drop_run_partitions, with the time as its last parameter p_now. The public
-- cronbox.drop_run_partitions passes now(); no cronbox role may execute this one (tests call it as the
-- owner or a superuser to fix the clock).
-- cronbox.drop_run_partitions_at(p_retention, p_now): drops whole daily partitions of
-- cronbox.run whose every row is older than p_now - p_retention. Retention never deletes
-- row by row. Takes the same advisory lock as ensure_run_partitions. Returns the names dropped.
CREATE OR REPLACE FUNCTION cronbox.drop_run_partitions_at(
    p_retention interval DEFAULT '30 days',
    p_now timestamptz DEFAULT now()
) RETURNS SETOF text
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_cutoff date;
    v_name text;
BEGIN
    IF p_retention IS NULL THEN
        RAISE EXCEPTION 'p_retention: must not be NULL' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    IF p_retention <= interval '0' OR p_retention > interval '100 years' THEN
        RAISE EXCEPTION 'p_retention: must be a positive interval of at most 100 years, got %', p_retention
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    v_cutoff := ((p_now - p_retention) AT TIME ZONE 'UTC')::date;
    PERFORM pg_advisory_xact_lock(hashtext('cronbox.run_partitions'));
    FOR v_name IN
        SELECT c.relname
        FROM pg_catalog.pg_inherits i
        JOIN pg_catalog.pg_class c ON c.oid = i.inhrelid
        WHERE i.inhparent = 'cronbox.run'::regclass
          AND c.relname ~ '^run_[0-9]{8}$'
          AND to_date(substr(c.relname, 5), 'YYYYMMDD') < v_cutoff
        ORDER BY c.relname
    LOOP
        EXECUTE format('DROP TABLE cronbox.%I', v_name);
        RETURN NEXT v_name;
    END LOOP;
END
$$;

COMMENT ON FUNCTION cronbox.drop_run_partitions_at(interval, timestamp with time zone) IS
'Internal (no cronbox role may execute it): the body of cronbox.drop_run_partitions(interval) with the time as p_now; tests use it to fix the clock. Drops the daily partitions of cronbox.run that lie wholly before now - retention (default 30 days). Returns the dropped partition names.';

ALTER FUNCTION cronbox.drop_run_partitions_at(interval, timestamp with time zone) OWNER TO cronbox_owner;
REVOKE ALL ON FUNCTION cronbox.drop_run_partitions_at(interval, timestamp with time zone) FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
