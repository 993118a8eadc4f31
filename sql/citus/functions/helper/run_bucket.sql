-- cronbox.run_bucket(run_id) (Citus only): the bucket a run id drawn by
-- cronbox.new_bucket_run_id(bucket_index) carries in bits 10-19, as its bucket value (NULL when no
-- bucket has that index). What lets a report by run id alone (complete_run, fail_run,
-- heartbeat, cancel) address one bucket. One index probe of cronbox.bucket; no lock.
CREATE OR REPLACE FUNCTION cronbox.run_bucket(run_id bigint) RETURNS integer
LANGUAGE sql STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT b.bucket FROM cronbox.bucket b WHERE b.bucket_index = ((run_id >> 10) & 1023)::integer
$$;

COMMENT ON FUNCTION cronbox.run_bucket(bigint) IS
'Citus: the bucket value carried by a run id drawn by cronbox.new_bucket_run_id(bucket_index) (bits 10-19: the bucket index).';

ALTER FUNCTION cronbox.run_bucket(bigint) OWNER TO cronbox_owner;
REVOKE ALL ON FUNCTION cronbox.run_bucket(bigint) FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
GRANT EXECUTE ON FUNCTION cronbox.run_bucket(bigint) TO cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
