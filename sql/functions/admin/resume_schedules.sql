-- cronbox.resume_schedules(queue, owner, name_like, reason): resumes, in one call, every paused
-- schedule the caller may change (a cronbox_user: its own) that matches all given filters
-- (as cronbox.pause_schedules). Set-based: what resume() does to one job, for all of them: each
-- continues with its first regular fire after now (fires inside the pause are skipped; a
-- fixed-delay job fires one interval from now, or when its running run finishes), held retry
-- and manual fires go back to the ready index, one change-log row per job (action resumed), one
-- NOTIFY. Quarantined jobs resume too (fix them first). Locks as pause_schedules, and goes
-- bucket by bucket as it does (a WARNING names the buckets of an unreachable Citus worker node,
-- left as they are). Returns the number of schedules resumed.
CREATE OR REPLACE FUNCTION cronbox.resume_schedules(
    queue text DEFAULT NULL,
    owner text DEFAULT NULL,
    name_like text DEFAULT NULL,
    reason text DEFAULT 'resumed by operator'
) RETURNS integer
LANGUAGE plpgsql VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_now timestamptz := now();
    v_set integer[];
    v_ids bigint[];
    v_names text[];
    v_resumed integer := 0;
    v_jobs bigint[];
    v_frontiers timestamptz[];
    v_next_fires timestamptz[];
    v_anchors timestamptz[];
    v_unreached integer[];
    v_nodes text;
    v_state text;
    v_message text;
    v_detail text;
    v_hint text;
BEGIN
    PERFORM cronbox.carry_caller();  -- on Citus, the caller for the policies on the worker nodes
    PERFORM cronbox.assert_reason(resume_schedules.reason);
    PERFORM cronbox.assert_job_filters(resume_schedules.queue, resume_schedules.owner, resume_schedules.name_like);
    -- On Citus's distributed jobs, the buckets of a worker node it cannot reach are named, not done.
    SELECT array_agg(u.bucket ORDER BY u.bucket), string_agg(DISTINCT u.node, ', ') INTO v_unreached, v_nodes
    FROM cronbox.unreachable_buckets('cronbox.job') u;
    -- A bucket set at a time, as pause_schedules.
    FOREACH v_set SLICE 1 IN ARRAY cronbox.bucket_walks('cronbox.job') LOOP
        CONTINUE WHEN v_set && v_unreached;
        v_ids := cronbox.lock_matching_jobs(resume_schedules.queue, resume_schedules.owner, resume_schedules.name_like,
                                            true, v_set);
        CONTINUE WHEN v_ids IS NULL;
        -- As resume(): the frontier moves to now (fixed delay: one interval from now, unless a run
        -- of it is unfinished, whose end continues the chain). Computed first, in a read: Citus
        -- refuses an update whose CASE holds a function that is not immutable (timestamptz
        -- arithmetic).
        SELECT array_agg(x.job_id), array_agg(x.frontier), array_agg(x.next_fire), array_agg(x.anchor)
        INTO v_jobs, v_frontiers, v_next_fires, v_anchors
        FROM (
            SELECT f.job_id,
                   CASE WHEN d.fixed_delay THEN d.anchor - interval '1 microsecond'
                        WHEN j.kind IN ('cron', 'every') AND j.finished_at IS NULL
                            THEN greatest(f.frontier, v_now, j.starts_at - interval '1 microsecond')
                        ELSE f.frontier END AS frontier,
                   CASE WHEN d.fixed_delay THEN CASE WHEN d.anchor <= j.ends_at OR j.ends_at IS NULL THEN d.anchor END
                        WHEN j.kind IN ('cron', 'every') AND j.finished_at IS NULL
                            THEN greatest(f.frontier, v_now, j.starts_at - interval '1 microsecond')
                        ELSE f.next_fire END AS next_fire,
                   d.anchor
            FROM cronbox.job j
            JOIN cronbox.job_fire f ON f.bucket = j.bucket AND f.job_id = j.job_id
            JOIN cronbox.job_stat s ON s.bucket = j.bucket AND s.job_id = j.job_id
            CROSS JOIN LATERAL (
                SELECT j.kind = 'every' AND j.every_mode = 'fixed_delay' AS fixed_delay,
                       CASE WHEN j.kind = 'every' AND j.every_mode = 'fixed_delay' AND NOT s.active_runs > 0
                            THEN greatest(date_trunc('second', v_now) + j.every, j.starts_at) END AS anchor) d
            WHERE j.bucket = ANY (v_set) AND j.job_id = ANY (v_ids)
        ) x;
        UPDATE cronbox.job_fire f SET frontier = x.frontier, next_fire = x.next_fire, paused = false
        FROM unnest(v_jobs, v_frontiers, v_next_fires) AS x(job_id, frontier, next_fire)
        WHERE f.bucket = ANY (v_set) AND f.job_id = x.job_id;
        UPDATE cronbox.job j SET
            anchor = coalesce(x.anchor, j.anchor),  -- (set for a fixed-delay job only)
            paused = false, paused_reason = NULL, paused_at = NULL, paused_until = NULL, updated_at = v_now
        FROM unnest(v_ids) AS i(job_id)
        LEFT JOIN unnest(v_jobs, v_anchors) AS x(job_id, anchor) ON x.job_id = i.job_id
        WHERE j.bucket = ANY (v_set) AND j.job_id = i.job_id;
        -- Fires held while paused (retries, manual) go back to the ready index now.
        PERFORM cronbox.release_futures(ARRAY(
            SELECT f.future_id FROM cronbox.job_future f
            WHERE f.bucket = ANY (v_set) AND f.job_id = ANY (v_ids) AND coalesce(f.hold, '') <> ''), v_set);  -- as release_job_holds
        -- the change log (the coordinator's own) from the names read first: on Citus an insert
        -- that reads a distributed table sends what it read to every worker node
        v_names := ARRAY(SELECT j.name FROM cronbox.job j WHERE j.bucket = ANY (v_set) AND j.job_id = ANY (v_ids)
                         ORDER BY j.job_id);
        INSERT INTO cronbox.job_change (job_id, job_name, action, reason, changed_by, changed_at)
        SELECT x.job_id, x.name, 'resumed', coalesce(resume_schedules.reason, 'resumed by operator'), cronbox.caller(), v_now
        FROM unnest(v_ids, v_names) AS x(job_id, name);
        v_resumed := v_resumed + cardinality(v_ids);
    END LOOP;
    IF v_unreached IS NOT NULL THEN
        RAISE WARNING 'resume_schedules: the schedules of buckets % were not looked at: their Citus worker node (%) cannot be reached', v_unreached, v_nodes
            USING HINT = 'Call it again once the node is back (schedules already resumed are left as they are).';
    END IF;
    IF v_resumed > 0 THEN
        PERFORM pg_notify('cronbox_schedule', '');
    END IF;
    RETURN v_resumed;
EXCEPTION WHEN OTHERS THEN
    -- Re-raised from here so that psql shows the message and one CONTEXT line naming the
    -- function the user called, not the internal frames (docs/sql.md, "Errors").
    GET STACKED DIAGNOSTICS v_state = RETURNED_SQLSTATE, v_message = MESSAGE_TEXT,
                            v_detail = PG_EXCEPTION_DETAIL, v_hint = PG_EXCEPTION_HINT;
    v_hint := cronbox.error_hint(v_state, v_message, v_hint);  -- a known cause's way out, if it has none
    IF v_detail <> '' AND v_hint <> '' THEN
        RAISE EXCEPTION USING ERRCODE = v_state, MESSAGE = v_message, DETAIL = v_detail, HINT = v_hint;
    ELSIF v_detail <> '' THEN
        RAISE EXCEPTION USING ERRCODE = v_state, MESSAGE = v_message, DETAIL = v_detail;
    ELSIF v_hint <> '' THEN
        RAISE EXCEPTION USING ERRCODE = v_state, MESSAGE = v_message, HINT = v_hint;
    END IF;
    RAISE EXCEPTION USING ERRCODE = v_state, MESSAGE = v_message;
END
$$;

COMMENT ON FUNCTION cronbox.resume_schedules(text, text, text, text) IS
'Resumes in one call every paused schedule you may change that matches all the filters given (at least one): queue, owner (a role), name_like (a LIKE pattern). As resume() for each, set-based: each continues with its first regular fire after now, one change-log row per job. On Citus with a worker node unreachable, the other nodes'' schedules are resumed and a WARNING names the buckets left. Returns how many were resumed.';

ALTER FUNCTION cronbox.resume_schedules(text, text, text, text) OWNER TO cronbox_owner;
REVOKE ALL ON FUNCTION cronbox.resume_schedules(text, text, text, text) FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
GRANT EXECUTE ON FUNCTION cronbox.resume_schedules(text, text, text, text) TO cronbox_admin, cronbox_user;
