-- cronbox.schedule_next_fixed_delay(p_job_id, p_finished_at, p_bucket): the fixed-delay hook. Called by
-- the worker-side functions (complete_run, fail_run, the reaper, overlap skips) when a
-- scheduled fire of a job reached its final state; the next fire is one `every` after
-- p_finished_at. No-op (returns NULL) for any other kind of job, a paused job, or one that
-- still has a pending scheduled or retry future. Locks the job row; the poller materialises it.
-- p_bucket: the job's bucket, every statement on that bucket's rows (finish_runs passes its
-- own); NULL: no bucket filter.
CREATE OR REPLACE FUNCTION cronbox.schedule_next_fixed_delay(
    p_job_id bigint,
    p_finished_at timestamptz,
    p_bucket integer DEFAULT NULL
) RETURNS timestamptz
LANGUAGE plpgsql
SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_job cronbox.job;
    v_next timestamptz;
BEGIN
    SELECT * INTO v_job FROM cronbox.job j
    WHERE (p_bucket IS NULL OR j.bucket = p_bucket)
      AND j.job_id = p_job_id AND j.kind = 'every' AND j.every_mode = 'fixed_delay'
    FOR UPDATE;
    IF NOT FOUND OR v_job.paused OR p_finished_at IS NULL THEN
        RETURN NULL;
    END IF;
    IF (SELECT f.next_fire FROM cronbox.job_fire f
        WHERE (p_bucket IS NULL OR f.bucket = p_bucket) AND f.job_id = p_job_id) IS NOT NULL OR EXISTS (
        SELECT 1 FROM cronbox.job_future f
        WHERE (p_bucket IS NULL OR f.bucket = p_bucket) AND f.job_id = p_job_id AND f.origin IN ('schedule', 'retry')) THEN
        RETURN NULL;   -- the chain already has its next fire
    END IF;
    -- Elapsed time: '1 day' is 24 hours whatever the session's TimeZone.
    v_next := p_finished_at + make_interval(secs => extract(epoch FROM v_job.every));
    IF v_next > v_job.ends_at THEN
        UPDATE cronbox.job j SET finished_at = p_finished_at
        WHERE (p_bucket IS NULL OR j.bucket = p_bucket) AND j.job_id = p_job_id;
        PERFORM cronbox.record_change(p_job_id, v_job.name, 'finished', 'ends_at passed', p_finished_at);
        RETURN NULL;
    END IF;
    UPDATE cronbox.job j SET anchor = v_next WHERE (p_bucket IS NULL OR j.bucket = p_bucket) AND j.job_id = p_job_id;
    UPDATE cronbox.job_fire f SET frontier = v_next - interval '1 microsecond', next_fire = v_next
    WHERE (p_bucket IS NULL OR f.bucket = p_bucket) AND f.job_id = p_job_id;
    PERFORM pg_notify('cronbox_schedule', p_job_id::text);
    RETURN v_next;
END
$$;

COMMENT ON FUNCTION cronbox.schedule_next_fixed_delay(bigint,timestamp with time zone,integer) IS
'Fixed-delay hook for the worker-side functions: when a scheduled fire of an every_mode => fixed_delay job is final, its next fire is p_finished_at + every. No-op for other jobs, paused jobs, or when a next fire or retry is already pending. p_bucket: the job''s bucket, whose rows alone are read and written (NULL: no filter). Returns the next fire time or NULL.';

ALTER FUNCTION cronbox.schedule_next_fixed_delay(bigint,timestamp with time zone,integer) OWNER TO cronbox_owner;
REVOKE ALL ON FUNCTION cronbox.schedule_next_fixed_delay(bigint,timestamp with time zone,integer) FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
