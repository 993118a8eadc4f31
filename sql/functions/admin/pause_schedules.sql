-- cronbox.pause_schedules(queue, owner, name_like, reason): pauses, in one call, every
-- schedule the caller may change (a cronbox_user: its own) that matches all given filters:
-- queue, owner role, name LIKE pattern (at least one; bounds in cronbox.lock_matching_jobs).
-- Set-based: what pause() does to one job, done by a handful of statements for all of them:
-- early-dispatched runs not yet claimed are cancelled, pending scheduled fires deleted (their
-- frontier rewound before them), the jobs marked paused with the reason, one change-log row
-- per job (action paused), one NOTIFY. Jobs already paused are left as they are. Locks the
-- jobs' locks in job_id order (waits for a dispatch of them to commit), then their rows.
-- Bucket by bucket where Citus distributes the jobs (each statement one bucket's), in one pass
-- elsewhere; with a worker node unreachable, the buckets of the others are done and a WARNING
-- names the ones left (call again once the node is back). Returns the number of schedules paused.
CREATE OR REPLACE FUNCTION cronbox.pause_schedules(
    queue text DEFAULT NULL,
    owner text DEFAULT NULL,
    name_like text DEFAULT NULL,
    reason text DEFAULT 'paused by operator'
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
    v_withdrawn jsonb;
    v_paused integer := 0;
    v_unreached integer[];
    v_nodes text;
    v_state text;
    v_message text;
    v_detail text;
    v_hint text;
BEGIN
    PERFORM cronbox.carry_caller();  -- on Citus, the caller for the policies on the worker nodes
    PERFORM cronbox.assert_reason(pause_schedules.reason);
    PERFORM cronbox.assert_job_filters(pause_schedules.queue, pause_schedules.owner, pause_schedules.name_like);
    -- On Citus's distributed jobs, the buckets of a worker node it cannot reach are named, not done.
    SELECT array_agg(u.bucket ORDER BY u.bucket), string_agg(DISTINCT u.node, ', ') INTO v_unreached, v_nodes
    FROM cronbox.unreachable_buckets('cronbox.job') u;
    -- A bucket set at a time (one bucket per statement where Citus distributes the jobs; one set
    -- of every bucket elsewhere, so one pass on plain PostgreSQL).
    FOREACH v_set SLICE 1 IN ARRAY cronbox.bucket_walks('cronbox.job') LOOP
        CONTINUE WHEN v_set && v_unreached;
        v_ids := cronbox.lock_matching_jobs(pause_schedules.queue, pause_schedules.owner, pause_schedules.name_like,
                                            false, v_set);
        CONTINUE WHEN v_ids IS NULL;
        -- Fires already written by early dispatch and not claimed: cancelled (per job, counted).
        v_withdrawn := cronbox.withdraw_early_runs_of(v_ids, 'cancelled: paused before its fire time', v_now, v_set);
        -- Pending scheduled fires deleted; each job's frontier rewound before its first deleted
        -- fire (a one-off dropped here is not taken as done), dropped fires no longer count.
        WITH gone AS (
            DELETE FROM cronbox.job_future f
            WHERE f.bucket = ANY (v_set) AND f.job_id = ANY (v_ids) AND f.origin = 'schedule' AND f.attempt = 1
            RETURNING f.job_id, f.fire_at
        ),
        per_job AS (
            SELECT g.job_id, min(g.fire_at) AS first, count(*) AS n FROM gone g GROUP BY g.job_id
        ),
        fire AS (  -- the saturation state (cronbox.job_fire)
            UPDATE cronbox.job_fire f SET
                frontier = CASE WHEN p.first IS NULL THEN f.frontier
                                ELSE least(f.frontier, p.first - interval '1 microsecond') END,
                next_fire = CASE WHEN p.first IS NULL THEN f.next_fire ELSE least(f.next_fire, p.first) END,
                fires_made = greatest(f.fires_made - coalesce(p.n, 0)
                                      - coalesce((v_withdrawn ->> f.job_id::text)::integer, 0), 0),
                paused = true
            FROM unnest(v_ids) AS x(id)
            LEFT JOIN per_job p ON p.job_id = x.id
            WHERE f.bucket = ANY (v_set) AND f.job_id = x.id
        )
        UPDATE cronbox.job j SET
            finished_at = CASE WHEN p.first IS NULL THEN j.finished_at END,
            paused = true,
            paused_reason = coalesce(pause_schedules.reason, 'paused by operator'),
            paused_at = v_now,
            paused_until = NULL,
            updated_at = v_now
        FROM unnest(v_ids) AS x(id)
        LEFT JOIN per_job p ON p.job_id = x.id
        WHERE j.bucket = ANY (v_set) AND j.job_id = x.id;
        -- the change log (the coordinator's own) from the names read first: on Citus an insert
        -- that reads a distributed table sends what it read to every worker node
        v_names := ARRAY(SELECT j.name FROM cronbox.job j WHERE j.bucket = ANY (v_set) AND j.job_id = ANY (v_ids)
                         ORDER BY j.job_id);
        INSERT INTO cronbox.job_change (job_id, job_name, action, reason, changed_by, changed_at)
        SELECT x.job_id, x.name, 'paused', coalesce(pause_schedules.reason, 'paused by operator'), cronbox.caller(), v_now
        FROM unnest(v_ids, v_names) AS x(job_id, name);
        v_paused := v_paused + cardinality(v_ids);
    END LOOP;
    IF v_unreached IS NOT NULL THEN
        RAISE WARNING 'pause_schedules: the schedules of buckets % were not looked at: their Citus worker node (%) cannot be reached', v_unreached, v_nodes
            USING HINT = 'Call it again once the node is back (schedules already paused are left as they are).';
    END IF;
    IF v_paused > 0 THEN
        PERFORM pg_notify('cronbox_schedule', '');
    END IF;
    RETURN v_paused;
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

COMMENT ON FUNCTION cronbox.pause_schedules(text, text, text, text) IS
'Pauses in one call every schedule you may change that matches all the filters given (at least one): queue, owner (a role), name_like (a LIKE pattern). As pause() for each, set-based: pending scheduled fires dropped, one change-log row per job. Already paused ones are left alone. On Citus with a worker node unreachable, the other nodes'' schedules are paused and a WARNING names the buckets left. Returns how many were paused.';

ALTER FUNCTION cronbox.pause_schedules(text, text, text, text) OWNER TO cronbox_owner;
REVOKE ALL ON FUNCTION cronbox.pause_schedules(text, text, text, text) FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
GRANT EXECUTE ON FUNCTION cronbox.pause_schedules(text, text, text, text) TO cronbox_admin, cronbox_user;
