-- cronbox.fold_job_stats_of(p_job_ids, p_bucket): the statistics changes of these jobs not folded yet,
-- folded now (cronbox.apply_job_stat_changes), under their locks (taken here in job_id order;
-- a caller may already hold some). For a job about to have a policy read its statistics while
-- deciding (schedule() giving it an overlap policy, fixed delay or a downstream job;
-- add_dependency; a backfilled fire with its own overlap policy at dispatch): from then on its
-- statistics are written where they are read. The change rows stay for the poller's fold,
-- which skips what was folded here (job_stat.folded_through). With p_bucket (the jobs' bucket)
-- every statement reads that bucket alone (one task on Citus); NULL: every bucket. A one-off whose
-- statistics were derived from its runs has them written into its row, and is folded from then on.
CREATE OR REPLACE FUNCTION cronbox.fold_job_stats_of(p_job_ids bigint[], p_bucket integer DEFAULT NULL)
RETURNS void
LANGUAGE plpgsql
SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_jobs bigint[];
    v_id bigint;
    v_bucket integer;
    v_d record;  -- a derived job's statistics (cronbox.job_stat_derived)
BEGIN
    v_jobs := ARRAY(SELECT DISTINCT u.id FROM unnest(p_job_ids) AS u(id) WHERE u.id IS NOT NULL ORDER BY 1);
    IF cardinality(v_jobs) = 0 THEN
        RETURN;  -- no job (a new one): nothing to fold
    END IF;
    PERFORM FROM cronbox.job_stat s
    WHERE (p_bucket IS NULL OR s.bucket = p_bucket) AND s.job_id = ANY (v_jobs)
    ORDER BY s.job_id
    FOR NO KEY UPDATE OF s;
    IF EXISTS (SELECT 1 FROM cronbox.job_stat_change c WHERE p_bucket IS NULL OR c.bucket = p_bucket) THEN
        -- (none waits to be folded: the usual case, nothing else to read)
        PERFORM cronbox.apply_job_stat_changes(NULL, v_jobs, p_bucket);
    END IF;
    -- A one-off whose statistics were derived from its runs (job_stat.stats_from_runs) has them
    -- written into its row now, from the same read as the views' (cronbox.job_stat_derived), and
    -- is folded as any job from then on (its pending changes, if a path wrote some, folded above:
    -- folded_through is past them). Values read first, then written by key (Citus: no
    -- sub-select of other tables in an update).
    FOR v_id, v_bucket IN
        SELECT s.job_id, s.bucket FROM cronbox.job_stat s
        WHERE (p_bucket IS NULL OR s.bucket = p_bucket) AND s.job_id = ANY (v_jobs) AND s.stats_from_runs
    LOOP
        SELECT * INTO v_d FROM cronbox.job_stat_derived(v_bucket, v_id);
        UPDATE cronbox.job_stat s SET
            active_runs = v_d.active_runs, last_fire_at = v_d.last_fire_at, last_run_id = v_d.last_run_id,
            last_run_state = v_d.last_run_state, last_success_at = v_d.last_success_at,
            consecutive_failures = v_d.consecutive_failures, consecutive_crashes = v_d.consecutive_crashes,
            stats_from_runs = false
        WHERE s.bucket = v_bucket AND s.job_id = v_id;
    END LOOP;
END
$$;

COMMENT ON FUNCTION cronbox.fold_job_stats_of(bigint[], integer) IS
'Internal: folds the pending statistics changes of these jobs into cronbox.job_stat now, under their locks (before a policy reads the job''s statistics while deciding); a one-off whose statistics were derived from its runs has them written into its row, and is folded from then on.';

ALTER FUNCTION cronbox.fold_job_stats_of(bigint[], integer) OWNER TO cronbox_owner;
REVOKE ALL ON FUNCTION cronbox.fold_job_stats_of(bigint[], integer) FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
