-- 0490: a job's calendar link (cronbox.job_calendar) carries its job's bucket, as every other
-- row of a job does (migration 0390): on Citus with the jobs distributed, the owner of a link is
-- checked by the job's key, cronbox.caller_owns_job(bucket, job_id), one shard's read (the Citus
-- layer's migration 0364), so that a role limited to its own schedules may use a calendar there.
-- schedule() writes it; the links written before get their job's (bucket 0 on plain PostgreSQL:
-- nothing to do there). Read in two steps, not joined: on Citus the jobs may be distributed and
-- the links the coordinator's own.
ALTER TABLE cronbox.job_calendar ADD COLUMN bucket integer NOT NULL DEFAULT 0;

DO $$
DECLARE
    v_ids bigint[] := ARRAY(SELECT DISTINCT c.job_id FROM cronbox.job_calendar c);
    v_jobs bigint[];
    v_buckets integer[];
BEGIN
    SELECT array_agg(j.job_id), array_agg(j.bucket) INTO v_jobs, v_buckets
    FROM cronbox.job j WHERE j.job_id = ANY (v_ids) AND j.bucket <> 0;
    UPDATE cronbox.job_calendar c SET bucket = x.bucket
    FROM unnest(v_jobs, v_buckets) AS x(job_id, bucket)
    WHERE c.job_id = x.job_id;
END
$$;
