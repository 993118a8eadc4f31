-- cronbox.record_finished(p_jobs, p_now, p_buckets): logs 'finished' in the change log for those
-- of p_jobs that have nothing left to schedule (job.finished_at, set when saturation found no
-- fire left) and whose last scheduled fire has now been decided (no future of origin 'schedule'
-- left: dispatched, skipped, failed or missed), once per finish (none logged since finished_at).
-- Called by dispatch and early dispatch after their write, under the jobs' locks. Indexes:
-- job_finished_idx (only finished jobs are probed), job_future_fire_unique, job_change_job_idx.
-- p_buckets: the jobs' bucket set (NULL: any). Two statements: the jobs read in their buckets
-- (job, job_fire, job_future: one shard's where they are distributed), then the change log
-- written (docs/citus.md: no statement reads a bucket's shards beside the coordinator's tables).
CREATE OR REPLACE FUNCTION cronbox.record_finished(p_jobs bigint[], p_now timestamptz, p_buckets integer[] DEFAULT NULL)
RETURNS integer
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_ids bigint[];
    v_names text[];
    v_reasons text[];
    v_since timestamptz[];
    v_logged integer;
BEGIN
    SELECT array_agg(j.job_id), array_agg(j.name),
           -- the saturation state probed only for a job with max_runs (NULL compares to nothing)
           array_agg(CASE WHEN j.max_runs IS NOT NULL
                               AND (SELECT f.fires_made FROM cronbox.job_fire f
                                    WHERE (p_buckets IS NULL OR f.bucket = ANY (p_buckets)) AND f.job_id = j.job_id) >= j.max_runs
                          THEN format('max_runs reached: %s fires', j.max_runs)
                          WHEN j.kind = 'at' THEN 'one-off fire handled'
                          WHEN j.ends_at IS NOT NULL THEN 'ends_at passed'
                          ELSE 'no fire left' END),
           array_agg(j.finished_at)
      INTO v_ids, v_names, v_reasons, v_since
    FROM cronbox.job j
    WHERE (p_buckets IS NULL OR j.bucket = ANY (p_buckets)) AND j.job_id = ANY (p_jobs) AND j.finished_at IS NOT NULL
      AND NOT EXISTS (SELECT 1 FROM cronbox.job_future f
                      WHERE (p_buckets IS NULL OR f.bucket = ANY (p_buckets)) AND f.job_id = j.job_id
                        AND f.origin = 'schedule');
    IF v_ids IS NULL THEN
        RETURN 0;
    END IF;
    WITH logged AS (
        INSERT INTO cronbox.job_change (job_id, job_name, action, reason, changed_by, changed_at)
        SELECT c.job_id, c.name, 'finished', c.reason, session_user, p_now
        FROM unnest(v_ids, v_names, v_reasons, v_since) AS c(job_id, name, reason, since)
        -- a probe per job (job_change_job_idx), never a join planned over the whole change log
        WHERE (SELECT x.job_id FROM cronbox.job_change x
               WHERE x.job_id = c.job_id AND x.action = 'finished' AND x.changed_at >= c.since LIMIT 1) IS NULL
        RETURNING 1
    )
    SELECT count(*)::integer INTO v_logged FROM logged;
    RETURN v_logged;
END
$$;

COMMENT ON FUNCTION cronbox.record_finished(bigint[], timestamp with time zone, integer[]) IS
'Internal: logs ''finished'' (one-off fire handled, ends_at passed, max_runs reached, no fire left) for those of p_jobs (in the bucket set p_buckets, NULL: any) with nothing left to schedule whose last scheduled fire has been decided, once per finish; called by dispatch and early dispatch.';

ALTER FUNCTION cronbox.record_finished(bigint[], timestamp with time zone, integer[]) OWNER TO cronbox_owner;
REVOKE ALL ON FUNCTION cronbox.record_finished(bigint[], timestamp with time zone, integer[]) FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
