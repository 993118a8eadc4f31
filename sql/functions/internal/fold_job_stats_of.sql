-- cronbox.fold_job_stats_of(p_job_ids, p_bucket): the statistics changes of these jobs not folded yet,
-- folded now (cronbox.apply_job_stat_changes), under their locks (taken here in job_id order;
-- a caller may already hold some). For a job about to have a policy read its statistics while
-- deciding (schedule() giving it an overlap policy, fixed delay or a downstream job;
-- add_dependency; a backfilled fire with its own overlap policy at dispatch): from then on its
-- statistics are written where they are read. The change rows stay for the poller's fold,
-- which skips what was folded here (job_stat.folded_through). With p_bucket (the jobs' bucket)
-- every statement reads that bucket alone (one task on Citus); NULL: every bucket.
CREATE OR REPLACE FUNCTION cronbox.fold_job_stats_of(p_job_ids bigint[], p_bucket integer DEFAULT NULL)
RETURNS void
LANGUAGE plpgsql
SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_jobs bigint[];
BEGIN
    v_jobs := ARRAY(SELECT DISTINCT u.id FROM unnest(p_job_ids) AS u(id) WHERE u.id IS NOT NULL ORDER BY 1);
    IF cardinality(v_jobs) = 0 THEN
        RETURN;  -- no job (a new one): nothing to fold
    END IF;
    PERFORM FROM cronbox.job_stat s
    WHERE (p_bucket IS NULL OR s.bucket = p_bucket) AND s.job_id = ANY (v_jobs)
    ORDER BY s.job_id
    FOR NO KEY UPDATE OF s;
    IF NOT EXISTS (SELECT 1 FROM cronbox.job_stat_change c WHERE p_bucket IS NULL OR c.bucket = p_bucket) THEN
        RETURN;  -- nothing waits to be folded (the usual case): nothing else to read
    END IF;
    PERFORM cronbox.apply_job_stat_changes(NULL, v_jobs, p_bucket);
END
$$;

COMMENT ON FUNCTION cronbox.fold_job_stats_of(bigint[], integer) IS
'Internal: folds the pending statistics changes of these jobs into cronbox.job_stat now, under their locks (before a policy reads the job''s statistics while deciding).';

ALTER FUNCTION cronbox.fold_job_stats_of(bigint[], integer) OWNER TO cronbox_owner;
REVOKE ALL ON FUNCTION cronbox.fold_job_stats_of(bigint[], integer) FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
