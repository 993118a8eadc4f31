-- cronbox.new_bucket_run_id(bucket_index): a run id that encodes its creation time and its bucket, for
-- a database with buckets (Citus: dispatch draws a bucket's run ids with it, so that a report by
-- run id finds the run's bucket, cronbox.run_bucket; plain PostgreSQL never calls it):
-- (epoch milliseconds << 20) | (bucket index << 10) | (sequence mod 2^10). Same time bits as
-- cronbox.new_run_id() (cronbox.run_id_time, run_id_at and the daily history partitions work
-- unchanged); unique as long as a bucket draws fewer than 1,024 ids in one
-- millisecond (any 1,024 consecutive draws differ). The plain cronbox.new_run_id() keeps its
-- 20 sequence bits. No SET search_path: inlined into the statement that draws (as the plain one).
CREATE OR REPLACE FUNCTION cronbox.new_bucket_run_id(p_bucket_index integer) RETURNS bigint
LANGUAGE sql VOLATILE PARALLEL UNSAFE
SECURITY INVOKER
AS $$
    SELECT (pg_catalog.floor(EXTRACT(epoch FROM pg_catalog.clock_timestamp()) * 1000)::bigint << 20)
         | ((p_bucket_index::bigint & 1023) << 10)
         | (pg_catalog.nextval('cronbox.run_id_seq'::pg_catalog.regclass) & 1023)
$$;

COMMENT ON FUNCTION cronbox.new_bucket_run_id(integer) IS
'Internal (a database with buckets: Citus): a run id carrying its creation time and bucket: (epoch milliseconds << 20) | (bucket index << 10) | (sequence mod 2^10).';

ALTER FUNCTION cronbox.new_bucket_run_id(integer) OWNER TO cronbox_owner;
REVOKE ALL ON FUNCTION cronbox.new_bucket_run_id(integer) FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
