-- Internal: the body of cronbox.ensure_run_partitions, with the time as its last parameter p_now. The public
-- cronbox.ensure_run_partitions passes now(); no cronbox role may execute this one (tests call it as the
-- owner or a superuser to fix the clock).
-- cronbox.ensure_run_partitions_at(p_days_ahead, p_now): creates the daily partitions of
-- cronbox.run (UTC days) from yesterday up to p_days_ahead days after p_now.
-- Idempotent (existing partitions are left alone); takes an advisory lock so two pollers
-- doing maintenance at once do not race on CREATE TABLE. Returns the number created.
CREATE OR REPLACE FUNCTION cronbox.ensure_run_partitions_at(
    p_days_ahead integer DEFAULT 7,
    p_now timestamptz DEFAULT now()
) RETURNS integer
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_day date;
    v_name text;
    v_created integer := 0;
BEGIN
    PERFORM pg_advisory_xact_lock(hashtext('cronbox.run_partitions'));
    FOR v_day IN
        SELECT d::date
        FROM generate_series((p_now AT TIME ZONE 'UTC')::date - 1,
                             (p_now AT TIME ZONE 'UTC')::date + p_days_ahead,
                             interval '1 day') AS d
    LOOP
        v_name := 'run_' || to_char(v_day, 'YYYYMMDD');
        CONTINUE WHEN to_regclass('cronbox.' || v_name) IS NOT NULL;
        EXECUTE format(
            -- fillfactor 45: room on the page for each run's next version, so its updates
            -- are heap-only (migration 0190)
            'CREATE TABLE cronbox.%I PARTITION OF cronbox.run FOR VALUES FROM (%s) TO (%s) '
            'WITH (fillfactor = 45)',
            v_name,
            cronbox.run_id_at(v_day::timestamp AT TIME ZONE 'UTC'),
            cronbox.run_id_at((v_day + 1)::timestamp AT TIME ZONE 'UTC'));
        v_created := v_created + 1;
    END LOOP;
    RETURN v_created;
END
$$;

COMMENT ON FUNCTION cronbox.ensure_run_partitions_at(integer, timestamp with time zone) IS
'Internal (no cronbox role may execute it): the body of cronbox.ensure_run_partitions(integer) with the time as p_now; tests use it to fix the clock. Creates the daily (UTC) partitions of cronbox.run from yesterday to p_days_ahead days ahead. Idempotent; the poller calls it at start and hourly.';

ALTER FUNCTION cronbox.ensure_run_partitions_at(integer, timestamp with time zone) OWNER TO cronbox_owner;
REVOKE ALL ON FUNCTION cronbox.ensure_run_partitions_at(integer, timestamp with time zone) FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
