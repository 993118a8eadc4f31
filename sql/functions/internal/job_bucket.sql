-- cronbox.job_bucket(name): the bucket of the job with this name, or of a new one. On a
-- database migrated with `cronbox migrate --citus` (it has the buckets: cronbox.bucket), the
-- bucket of the name's group (cronbox.bucket_of), except for a job made before the buckets,
-- which stays in bucket 0 while the jobs are the coordinator's own: there it is looked up by
-- name (distributing the jobs moves each into its name's bucket first). On plain PostgreSQL
-- there is one bucket, 0. Called once per call that finds or creates a job by name; every
-- other row of the job copies the job's bucket.
CREATE OR REPLACE FUNCTION cronbox.job_bucket(p_name text) RETURNS integer
LANGUAGE plpgsql STABLE
SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_bucket integer;
    v_found integer;
BEGIN
    IF to_regclass('cronbox.bucket') IS NULL THEN
        RETURN 0;
    END IF;
    v_bucket := cronbox.bucket_of(p_name);
    IF v_bucket <> 0 AND NOT EXISTS (SELECT 1 FROM pg_catalog.pg_dist_partition p
                                     WHERE p.logicalrelid = 'cronbox.job'::regclass) THEN
        SELECT j.bucket INTO v_found FROM cronbox.job j WHERE j.name = p_name;
        RETURN coalesce(v_found, v_bucket);
    END IF;
    RETURN v_bucket;
END
$$;

COMMENT ON FUNCTION cronbox.job_bucket(text) IS
'Internal: the bucket of the job with this name, or of a new one: cronbox.bucket_of on Citus (a job made before the buckets, while the jobs are local: where it is), 0 on plain PostgreSQL.';

ALTER FUNCTION cronbox.job_bucket(text) OWNER TO cronbox_owner;
REVOKE ALL ON FUNCTION cronbox.job_bucket(text) FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
