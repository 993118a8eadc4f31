-- Internal: the body of cronbox.resume_paused, with the time as its last parameter p_now. The public
-- cronbox.resume_paused passes now(); no cronbox role may execute this one (tests call it as the
-- owner or a superuser to fix the clock).
-- cronbox.resume_paused_at(p_limit, p_bucket, p_now): ends pauses whose until has passed. Up to p_limit
-- jobs from job_paused_until_idx, their locks (job_stat rows, cronbox.lock_job_id) and job
-- rows taken FOR ... SKIP LOCKED in one statement (two pollers take disjoint jobs; the pass
-- never waits, so taking the job row before resume_at's wait-free re-lock cannot deadlock
-- with a writer holding the job's lock), each resumed through cronbox.resume_at from its until time (one call per job: the
-- resume code is per job and such jobs are few), logged as 'resumed' by 'cronbox'. A job
-- resumed or re-paused meanwhile is left alone. Returns how many jobs were resumed.
-- p_bucket: the jobs of that bucket only, the walk filtered on it; each job resumed in its own
-- bucket (cronbox.resume_at's p_bucket, from the walk); NULL: every bucket.
CREATE OR REPLACE FUNCTION cronbox.resume_paused_at(
    p_limit integer DEFAULT 1000,
    p_bucket integer DEFAULT NULL,
    p_now timestamptz DEFAULT now()
) RETURNS integer
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_set integer[];  -- the buckets walked; NULL: every bucket
    v_job record;
    v_n integer := 0;
BEGIN
    IF p_bucket IS NOT NULL THEN
        v_set := ARRAY(SELECT unnest(cronbox.bucket_walks('cronbox.job', p_bucket)));
    END IF;
    FOR v_job IN
        SELECT j.name, j.paused_until, j.bucket
        FROM cronbox.job j
        -- the job's lock (its job_stat row) by a probe, never a join (a join planned while
        -- job_stat looked empty read all of it every tick: docs/architecture.md, SQL conventions)
        CROSS JOIN LATERAL (SELECT s.job_id FROM cronbox.job_stat s
                            WHERE (v_set IS NULL OR s.bucket = ANY (v_set)) AND s.job_id = j.job_id
                            FOR NO KEY UPDATE SKIP LOCKED) s
        WHERE j.paused_until <= p_now AND j.paused AND (v_set IS NULL OR j.bucket = ANY (v_set))
        ORDER BY j.paused_until
        LIMIT p_limit
        FOR UPDATE OF j SKIP LOCKED
    LOOP
        IF cronbox.resume_at(v_job.name,
                             format('resumed automatically: paused until %s', v_job.paused_until),
                             v_job.paused_until, v_job.bucket, p_now) THEN
            v_n := v_n + 1;
        END IF;
    END LOOP;
    RETURN v_n;
END
$$;

COMMENT ON FUNCTION cronbox.resume_paused_at(integer, integer, timestamp with time zone) IS
'Internal (no cronbox role may execute it): the body of cronbox.resume_paused(integer, integer) with the time as p_now; tests use it to fix the clock. Poller: resumes up to p_limit jobs paused with until => ... whose time has passed, through the same code as resume(), from that time; the change log says resumed automatically, by cronbox. p_bucket: that bucket''s only (NULL: every bucket). Returns the count.';

ALTER FUNCTION cronbox.resume_paused_at(integer, integer, timestamp with time zone) OWNER TO cronbox_owner;
REVOKE ALL ON FUNCTION cronbox.resume_paused_at(integer, integer, timestamp with time zone) FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
