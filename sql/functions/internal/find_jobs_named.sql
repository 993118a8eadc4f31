-- cronbox.find_jobs_named(names): the jobs with these names (name, job_id, bucket), each read in
-- the bucket its name gives (cronbox.job_bucket): one statement per bucket, so on Citus each is
-- one task where a look-up of every name at once reads every bucket. Names with no job are left
-- out; NULLs and repeats are ignored. No locks. Row security applies (SECURITY INVOKER).
CREATE OR REPLACE FUNCTION cronbox.find_jobs_named(p_names text[])
RETURNS TABLE (name text, job_id bigint, bucket integer)
LANGUAGE plpgsql STABLE
SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_bucket integer;
    v_names text[];  -- the names in that bucket
BEGIN
    FOR v_bucket, v_names IN
        SELECT b.bucket, array_agg(b.name)
        FROM (SELECT DISTINCT u.name, cronbox.job_bucket(u.name) AS bucket
              FROM unnest(p_names) AS u(name) WHERE u.name IS NOT NULL) b
        GROUP BY b.bucket
    LOOP
        RETURN QUERY SELECT j.name, j.job_id, j.bucket FROM cronbox.job j
                     WHERE j.bucket = v_bucket AND j.name = ANY (v_names);
    END LOOP;
END
$$;

COMMENT ON FUNCTION cronbox.find_jobs_named(text[]) IS
'Internal: the jobs with these names (name, job_id, bucket), each read in the bucket its name gives (cronbox.job_bucket), one statement per bucket; names with no job left out. No locks.';

ALTER FUNCTION cronbox.find_jobs_named(text[]) OWNER TO cronbox_owner;
REVOKE ALL ON FUNCTION cronbox.find_jobs_named(text[]) FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
