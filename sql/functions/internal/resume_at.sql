-- Internal: the body of cronbox.resume, with the time as its last parameter p_now. The public
-- cronbox.resume passes now(); no cronbox role may execute this one (tests call it as the
-- owner or a superuser to fix the clock).
-- cronbox.resume_at(name, reason, p_paused_until, p_bucket, p_now): un-pauses a job. Under the job's row lock it moves the
-- frontier to p_now, so the job continues with its first regular fire after p_now: fires that
-- fell inside the pause are skipped, not caught up. Exception: a one-off (`at`) whose time
-- passed during the pause is handed to its catch-up policy (default 'latest': it fires now).
-- Returns false if the job was not paused (nothing written). Unknown name: P0002.
-- p_paused_until (cronbox.resume_paused only): the automatic resume of a pause whose until
-- passed; the job continues from that time (a fire exactly then runs; later ones follow the
-- catch-up policy if the poller is late), logged as changed_by 'cronbox'; false if the job's
-- paused_until is no longer that time (re-paused or resumed meanwhile). Clears paused_until.
-- p_bucket: the job's bucket (cronbox.resume_paused knows it from its walk); every statement
-- reads and writes that bucket's rows only (one shard on Citus). NULL: the bucket a job of that
-- name is given (cronbox.job_bucket: 0 on plain PostgreSQL), or, if no job of that name is
-- there, the job's bucket looked up by name over every bucket.
CREATE OR REPLACE FUNCTION cronbox.resume_at(
    name   text,
    reason text DEFAULT 'resumed by operator',
    p_paused_until timestamptz DEFAULT NULL,
    p_bucket integer DEFAULT NULL,
    p_now  timestamptz DEFAULT now()
) RETURNS boolean
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_job cronbox.job;
    v_bucket integer := p_bucket;
    v_id bigint;
    v_active integer;
    v_held bigint[];
    v_anchor timestamptz;
    -- Where the job continues from: now, or the end of a pause that ended by itself.
    v_from timestamptz := coalesce(p_paused_until - interval '1 microsecond', p_now);
    v_start timestamptz;
BEGIN
    PERFORM cronbox.assert_job_name('name', resume_at.name);
    PERFORM cronbox.assert_reason(resume_at.reason);
    PERFORM cronbox.bucket_walks('cronbox.job', p_bucket);  -- a negative bucket: 22023
    IF v_bucket IS NULL THEN
        v_bucket := cronbox.job_bucket(resume_at.name);
        SELECT j.job_id INTO v_id FROM cronbox.job j WHERE j.bucket = v_bucket AND j.name = resume_at.name;
        IF v_id IS NULL THEN  -- not where its name puts it (made before the buckets): look it up
            SELECT j.bucket, j.job_id INTO v_bucket, v_id FROM cronbox.job j WHERE j.name = resume_at.name;
        END IF;
    ELSE
        SELECT j.job_id INTO v_id FROM cronbox.job j WHERE j.bucket = v_bucket AND j.name = resume_at.name;
    END IF;
    -- the job's lock (its job_stat row, cronbox.lock_job_id, in the bucket), then its row; if the
    -- name changed hands while waiting (unscheduled, scheduled anew), the new job's lock instead
    LOOP
        IF v_id IS NULL THEN
            RAISE EXCEPTION 'name: no schedule named %', quote_literal(resume_at.name) USING ERRCODE = 'no_data_found';
        END IF;
        PERFORM cronbox.lock_job_id(v_id, v_bucket);
        SELECT * INTO v_job FROM cronbox.job j WHERE j.bucket = v_bucket AND j.name = resume_at.name FOR UPDATE;
        EXIT WHEN v_job.job_id IS NOT DISTINCT FROM v_id;
        v_id := v_job.job_id;
    END LOOP;
    IF NOT v_job.paused OR (p_paused_until IS NOT NULL
                            AND v_job.paused_until IS DISTINCT FROM p_paused_until) THEN
        RETURN false;
    END IF;
    -- (times computed beforehand: no STABLE expression of a column in an update, Citus)
    v_start := v_job.starts_at - interval '1 microsecond';
    IF v_job.kind = 'every' AND v_job.every_mode = 'fixed_delay' THEN
        -- One interval after resume; a run still going continues the chain when it finishes.
        SELECT s.active_runs INTO v_active FROM cronbox.job_stat s WHERE s.bucket = v_bucket AND s.job_id = v_id;
        v_anchor := CASE WHEN v_active > 0 THEN NULL
                         ELSE greatest(date_trunc('second', coalesce(p_paused_until, p_now)) + v_job.every, v_job.starts_at) END;
        UPDATE cronbox.job_fire f SET
            frontier = v_anchor - interval '1 microsecond',
            next_fire = CASE WHEN v_anchor <= v_job.ends_at OR v_job.ends_at IS NULL THEN v_anchor END,
            paused = false
        WHERE f.bucket = v_bucket AND f.job_id = v_id;
    ELSIF v_job.kind IN ('cron', 'every') AND v_job.finished_at IS NULL THEN
        UPDATE cronbox.job_fire f SET
            frontier = greatest(f.frontier, v_from, v_start),
            next_fire = greatest(f.frontier, v_from, v_start),
            paused = false
        WHERE f.bucket = v_bucket AND f.job_id = v_id;
    ELSE
        UPDATE cronbox.job_fire f SET paused = false WHERE f.bucket = v_bucket AND f.job_id = v_id;
    END IF;
    UPDATE cronbox.job j SET
        anchor = coalesce(v_anchor, j.anchor),  -- (set for a fixed-delay job only)
        paused = false, paused_reason = NULL, paused_at = NULL, paused_until = NULL, updated_at = p_now
    WHERE j.bucket = v_bucket AND j.job_id = v_id;
    -- Retry futures held while paused go back to the ready index now, not at the backstop
    -- (cronbox.release_job_holds, in the bucket: the job's futures by key, the hold checked in a
    -- form that matches no partial index, as cronbox.release_futures says).
    v_held := ARRAY(SELECT f.future_id FROM cronbox.job_future f
                    WHERE f.bucket = v_bucket AND f.job_id = v_id AND coalesce(f.hold, '') <> '');
    IF cardinality(v_held) > 0 THEN
        PERFORM cronbox.release_futures(v_held, ARRAY[v_bucket]);
    END IF;
    IF p_paused_until IS NULL THEN
        PERFORM cronbox.record_change(v_id, v_job.name, 'resumed',
                                      coalesce(resume_at.reason, 'resumed by operator'), p_now);
    ELSE  -- nobody called it: cronbox itself resumed the job
        INSERT INTO cronbox.job_change (job_id, job_name, action, reason, changed_by, changed_at)
        VALUES (v_id, v_job.name, 'resumed', resume_at.reason, 'cronbox', p_now);
    END IF;
    PERFORM pg_notify('cronbox_schedule', v_id::text);
    RETURN true;
END
$$;

COMMENT ON FUNCTION cronbox.resume_at(text, text, timestamp with time zone, integer, timestamp with time zone) IS
'Internal (no cronbox role may execute it): the body of cronbox.resume(text, text) with the time as p_now; tests use it to fix the clock. Resumes a paused job from p_now: the fires that fell inside the pause are skipped (a one-off whose time passed goes to its catch-up policy). Returns false if the job was not paused. p_paused_until (cronbox.resume_paused only): the automatic resume of a pause whose until passed, from that time, logged as changed_by cronbox. p_bucket: the job''s bucket, every statement on that bucket''s rows (NULL: the bucket its name gives it, or looked up).';

ALTER FUNCTION cronbox.resume_at(text, text, timestamp with time zone, integer, timestamp with time zone) OWNER TO cronbox_owner;
REVOKE ALL ON FUNCTION cronbox.resume_at(text, text, timestamp with time zone, integer, timestamp with time zone) FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
