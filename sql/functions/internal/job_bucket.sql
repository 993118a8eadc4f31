-- cronbox.job_bucket(name): the bucket a new job with this name goes into. On a database
-- migrated with `cronbox migrate --citus` (it has the buckets: cronbox.bucket), the bucket of
-- the name's group (cronbox.bucket_of, the Citus layer's); on plain PostgreSQL there is one
-- bucket, 0. Called once per job created (schedule()); every other row of the job copies the
-- job's bucket.
CREATE OR REPLACE FUNCTION cronbox.job_bucket(p_name text) RETURNS integer
LANGUAGE plpgsql STABLE
SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF to_regclass('cronbox.bucket') IS NULL THEN
        RETURN 0;
    END IF;
    RETURN cronbox.bucket_of(p_name);
END
$$;

COMMENT ON FUNCTION cronbox.job_bucket(text) IS
'Internal: the bucket of a new job with this name: cronbox.bucket_of on Citus, 0 on plain PostgreSQL.';

ALTER FUNCTION cronbox.job_bucket(text) OWNER TO cronbox_owner;
REVOKE ALL ON FUNCTION cronbox.job_bucket(text) FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
