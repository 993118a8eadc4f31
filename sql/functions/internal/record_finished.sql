-- cronbox.record_finished(p_jobs, p_buckets): writes into the change log the 'finished' row that
-- cronbox.schedule_changes shows, read from the job's state (cronbox.job_finishes: nothing left
-- to schedule, no scheduled fire pending), for those of p_jobs whose finish no row logs yet
-- (none since finished_at), with the time and reason the view showed. Called before the state
-- it is read from goes: by schedule() before it reopens a finished job (finished_at cleared,
-- its pending fires deleted), by unschedule() before it deletes the job; under the job's lock.
-- Dispatch does not call it: a finish shows in the view from the commit that decided the last
-- scheduled fire. p_buckets: the jobs' bucket set (NULL: any). Two statements: the jobs read in
-- their buckets (job, job_fire, job_future: one shard's where they are distributed), then the
-- change log written (docs/citus.md: no statement reads a bucket's shards beside the
-- coordinator's tables). Indexes: job_finished_idx, job_future_fire_unique, job_change_job_idx.
CREATE OR REPLACE FUNCTION cronbox.record_finished(p_jobs bigint[], p_buckets integer[] DEFAULT NULL)
RETURNS integer
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_ids bigint[];
    v_names text[];
    v_reasons text[];
    v_at timestamptz[];
    v_since timestamptz[];
    v_logged integer;
BEGIN
    -- cronbox.job_finishes' rows of p_jobs, written out with the bucket set on each table (read
    -- through the view, Citus would not prune the joined tables' shards: one task per bucket)
    SELECT array_agg(j.job_id), array_agg(j.name),
           array_agg(CASE WHEN j.max_runs IS NOT NULL AND jf.fires_made >= j.max_runs
                              THEN format('max_runs reached: %s fires', j.max_runs)
                          WHEN j.kind = 'at' THEN 'one-off fire handled'
                          WHEN j.ends_at IS NOT NULL THEN 'ends_at passed'
                          ELSE 'no fire left' END),
           array_agg(greatest(j.finished_at, jf.frontier)), array_agg(j.finished_at)
      INTO v_ids, v_names, v_reasons, v_at, v_since
    FROM cronbox.job j
    JOIN cronbox.job_fire jf ON (p_buckets IS NULL OR jf.bucket = ANY (p_buckets))
                            AND jf.bucket = j.bucket AND jf.job_id = j.job_id
    WHERE (p_buckets IS NULL OR j.bucket = ANY (p_buckets)) AND j.job_id = ANY (p_jobs) AND j.finished_at IS NOT NULL
      AND NOT EXISTS (SELECT 1 FROM cronbox.job_future f
                      WHERE (p_buckets IS NULL OR f.bucket = ANY (p_buckets)) AND f.bucket = j.bucket
                        AND f.job_id = j.job_id AND f.origin = 'schedule');
    IF v_ids IS NULL THEN
        RETURN 0;
    END IF;
    WITH logged AS (
        INSERT INTO cronbox.job_change (job_id, job_name, action, reason, changed_by, changed_at)
        SELECT c.job_id, c.name, 'finished', c.reason, 'cronbox', c.changed_at
        FROM unnest(v_ids, v_names, v_reasons, v_at, v_since) AS c(job_id, name, reason, changed_at, since)
        -- a probe per job (job_change_job_idx), never a join planned over the whole change log
        WHERE (SELECT x.job_id FROM cronbox.job_change x
               WHERE x.job_id = c.job_id AND x.action = 'finished' AND x.changed_at >= c.since LIMIT 1) IS NULL
        RETURNING 1
    )
    SELECT count(*)::integer INTO v_logged FROM logged;
    RETURN v_logged;
END
$$;

COMMENT ON FUNCTION cronbox.record_finished(bigint[], integer[]) IS
'Internal: logs the ''finished'' row cronbox.schedule_changes shows from the job''s state (cronbox.job_finishes) for those of p_jobs (in the bucket set p_buckets, NULL: any) whose finish no row logs yet; called by schedule() before it reopens a finished job and by unschedule() before it deletes one.';

ALTER FUNCTION cronbox.record_finished(bigint[], integer[]) OWNER TO cronbox_owner;
REVOKE ALL ON FUNCTION cronbox.record_finished(bigint[], integer[]) FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
