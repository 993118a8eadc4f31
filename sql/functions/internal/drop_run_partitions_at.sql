-- Internal: the body of cronbox.drop_run_partitions, with the time as its last parameter p_now. The public
-- cronbox.drop_run_partitions passes now(); no cronbox role may execute this one (tests call it as the
-- owner or a superuser to fix the clock).
-- cronbox.drop_run_partitions_at(p_retention, p_now): drops whole daily partitions of
-- cronbox.run whose every row is older than p_now - p_retention. Retention never deletes
-- row by row. A day with a run still in flight (its run id in the day's range: a run's history
-- row is written into the partition of the day it was dispatched, however long it lasts) is
-- kept until that run is final. The late reports of the runs dropped go with them. Takes the
-- same advisory lock as ensure_run_partitions. Returns the names dropped.
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
    v_lo bigint;
    v_hi bigint;
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
        v_lo := cronbox.run_id_at(to_date(substr(v_name, 5), 'YYYYMMDD')::timestamp AT TIME ZONE 'UTC');
        v_hi := cronbox.run_id_at((to_date(substr(v_name, 5), 'YYYYMMDD') + 1)::timestamp AT TIME ZONE 'UTC');
        -- Runs of that day not final yet: their outbox rows (the run in flight, keyed by run id).
        CONTINUE WHEN EXISTS (SELECT 1 FROM cronbox.outbox o
                              WHERE o.outbox_id >= v_lo AND o.outbox_id < v_hi AND o.kind = 'run');
        EXECUTE format('DROP TABLE cronbox.%I', v_name);
        DELETE FROM cronbox.run_late_report l WHERE l.run_id >= v_lo AND l.run_id < v_hi;
        RETURN NEXT v_name;
    END LOOP;
END
$$;

COMMENT ON FUNCTION cronbox.drop_run_partitions_at(interval, timestamp with time zone) IS
'Internal (no cronbox role may execute it): the body of cronbox.drop_run_partitions(interval) with the time as p_now; tests use it to fix the clock. Drops the daily partitions of cronbox.run that lie wholly before now - retention (default 30 days), except a day with a run still in flight, and the late reports of the runs dropped. Returns the dropped partition names.';

ALTER FUNCTION cronbox.drop_run_partitions_at(interval, timestamp with time zone) OWNER TO cronbox_owner;
REVOKE ALL ON FUNCTION cronbox.drop_run_partitions_at(interval, timestamp with time zone) FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
