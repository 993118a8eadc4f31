-- cronbox.new_run_id(): a run id that encodes its creation time.
-- (milliseconds since 1970 << 20) | (sequence mod 2^20): ids grow with time, so cronbox.run can
-- be range-partitioned on run_id by day while lookups by run_id prune to one partition.
-- Unique as long as fewer than 2^20 ids are drawn in one millisecond. No locks beyond nextval.
CREATE OR REPLACE FUNCTION cronbox.new_run_id() RETURNS bigint
LANGUAGE sql VOLATILE PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT (floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint << 20)
         | (nextval('cronbox.run_id_seq') & 1048575)
$$;

COMMENT ON FUNCTION cronbox.new_run_id() IS
'A run id that encodes its creation time: (epoch milliseconds << 20) | (sequence mod 2^20). cronbox.run is range-partitioned on it by day.';
