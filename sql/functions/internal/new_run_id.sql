-- cronbox.new_run_id(): a run id that encodes its creation time.
-- (milliseconds since 1970 << 20) | (sequence mod 2^20): ids grow with time, so cronbox.run can
-- be range-partitioned on run_id by day while lookups by run_id prune to one partition.
-- Unique as long as fewer than 2^20 ids are drawn in one millisecond. No locks beyond nextval.
-- No SET search_path on purpose: a SQL function without SET clauses is inlined into the
-- calling statement (dispatch draws one id per run: a function call each cost ~50 us). Every
-- name in the body is schema-qualified or a pg_catalog built-in (pg_catalog is always searched first).
CREATE OR REPLACE FUNCTION cronbox.new_run_id() RETURNS bigint
LANGUAGE sql VOLATILE PARALLEL UNSAFE
SECURITY INVOKER
AS $$
    SELECT (pg_catalog.floor(EXTRACT(epoch FROM pg_catalog.clock_timestamp()) * 1000)::bigint << 20)
         | (pg_catalog.nextval('cronbox.run_id_seq'::pg_catalog.regclass) & 1048575)
$$;

COMMENT ON FUNCTION cronbox.new_run_id() IS
'A run id that encodes its creation time: (epoch milliseconds << 20) | (sequence mod 2^20). cronbox.run is range-partitioned on it by day.';

ALTER FUNCTION cronbox.new_run_id() OWNER TO cronbox_owner;
REVOKE ALL ON FUNCTION cronbox.new_run_id() FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
