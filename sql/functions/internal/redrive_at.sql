-- Internal: the body of cronbox.redrive, with the time as its last parameter p_now. The public
-- cronbox.redrive passes now(); no cronbox role may execute this one (tests call it as the
-- owner or a superuser to fix the clock).
-- cronbox.redrive_at(id, queue, everything, p_now): puts dead letters back into the outbox
-- (attempts reset, claimable now) and wakes the relays. Choose rows by dead_letter id, by
-- queue, or everything => true; id and queue combine with AND. A run that was marked
-- 'undeliverable' goes back to dispatched (job_stat.active_runs follows). One statement per table;
-- the runs' on a database with buckets per bucket of their history rows, in bucket order, each on
-- that bucket's rows alone (one shard's where Citus distributes them).
-- Returns the number of messages put back.
CREATE OR REPLACE FUNCTION cronbox.redrive_at(
    id bigint DEFAULT NULL,
    queue text DEFAULT NULL,
    everything boolean DEFAULT false,
    p_now timestamptz DEFAULT now()
) RETURNS integer
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET plan_cache_mode = force_custom_plan  -- Citus routes a statement to one shard only with its bucket bound
AS $$
DECLARE
    v_jobs bigint[];      -- the revived runs' jobs, locked
    v_count integer;
    v_runs bigint[];
    v_needs jsonb[];
    v_dead_of jsonb;          -- a dead run's message, timeout and last error, by run id
    v_notes bigint[];         -- the notifications put back
    v_buckets integer[];      -- the buckets the runs' ids carry ({NULL}: no buckets, plain PostgreSQL)
    v_b integer;              -- the bucket worked (NULL: every row)
    v_bucket_of jsonb;        -- job name -> bucket, of the notifications' jobs
BEGIN
    IF redrive_at.id IS NULL AND redrive_at.queue IS NULL AND NOT coalesce(redrive_at.everything, false) THEN
        RAISE EXCEPTION 'redrive: say which dead letters: id => ..., queue => ... or everything => true'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;

    -- the buckets of the jobs the notifications are about, read first (Citus refuses the jobs
    -- read by a correlated subquery beside the CTEs below)
    SELECT jsonb_object_agg(j.name, j.bucket) INTO v_bucket_of
    FROM cronbox.job j
    WHERE j.name IN (SELECT d.message ->> 'job' FROM cronbox.dead_letter d
                     WHERE (redrive_at.id IS NULL OR d.dead_letter_id = redrive_at.id)
                       AND (redrive_at.queue IS NULL OR d.queue = redrive_at.queue)
                       AND (d.kind <> 'run' OR d.run_id IS NULL));
    WITH gone AS (
        DELETE FROM cronbox.dead_letter d
        WHERE (redrive_at.id IS NULL OR d.dead_letter_id = redrive_at.id)
          AND (redrive_at.queue IS NULL OR d.queue = redrive_at.queue)
        RETURNING d.*
    ),
    -- notifications go back as they were; a run's message goes back with its run (below)
    back AS (
        INSERT INTO cronbox.outbox (run_id, queue, kind, message, timeout, created_at, available_at,
                                    attempts, last_error, bucket)
        SELECT g.run_id, g.queue, g.kind, g.message, g.timeout, g.created_at, p_now,
               0, 'redriven after: ' || coalesce(g.last_error, '?'),
               -- the bucket of the job it is about (none: 0)
               coalesce((v_bucket_of ->> (g.message ->> 'job'))::integer, 0)
        FROM gone g
        WHERE g.kind <> 'run' OR g.run_id IS NULL
        ORDER BY g.dead_letter_id
        RETURNING outbox_id
    )
    SELECT (SELECT array_agg(b.outbox_id) FROM back b), count(*)::integer, array_agg(g.run_id ORDER BY g.run_id) FILTER (WHERE g.kind = 'run' AND g.run_id IS NOT NULL),
           jsonb_object_agg(g.run_id::text, jsonb_build_object('message', g.message, 'timeout', g.timeout,
                                                               'last_error', g.last_error))
               FILTER (WHERE g.kind = 'run' AND g.run_id IS NOT NULL)
      INTO v_notes, v_count, v_runs, v_dead_of
    FROM gone g;
    IF v_notes IS NOT NULL THEN  -- a job's notification again: to its own recipients too (job.notify)
        PERFORM cronbox.notify_stakeholders(v_notes);
    END IF;

    IF v_runs IS NOT NULL THEN
        v_buckets := ARRAY[NULL]::integer[];
        IF to_regclass('cronbox.bucket') IS NOT NULL THEN  -- the buckets of their history rows
            v_buckets := ARRAY(SELECT DISTINCT r.bucket FROM cronbox.run r
                               WHERE r.run_id = ANY (v_runs) AND r.run_id BETWEEN v_runs[1] AND v_runs[cardinality(v_runs)]
                               ORDER BY r.bucket);
        END IF;
    END IF;
    FOREACH v_b IN ARRAY coalesce(v_buckets, '{}') LOOP
        -- The jobs' locks (job_stat rows, cronbox.lock_job_id) in job_id order before their
        -- runs, as finish_runs takes them: active_runs changes only under the job's lock.
        v_jobs := ARRAY(
            SELECT s.job_id
            FROM cronbox.job_stat s
            WHERE (v_b IS NULL OR s.bucket = v_b)
              AND s.job_id IN (SELECT r.job_id FROM cronbox.run r
                               WHERE (v_b IS NULL OR r.bucket = v_b)
                                 AND r.run_id = ANY (v_runs) AND r.run_id BETWEEN v_runs[1] AND v_runs[cardinality(v_runs)])
            ORDER BY s.job_id
            FOR NO KEY UPDATE OF s);
        -- a run in flight again: a job's early 'skip' run, decided on the premise that none
        -- would be, is taken back (its fire decided at its time)
        PERFORM cronbox.withdraw_early_skip_runs(v_jobs, p_now, CASE WHEN v_b IS NOT NULL THEN ARRAY[v_b] END);
        -- failed (undeliverable) -> dispatched: the run is in flight again, its outbox row (the
        -- run until its final report) in place of its history row.
        WITH revived AS (
            DELETE FROM cronbox.run r
            WHERE (v_b IS NULL OR r.bucket = v_b)
              AND r.run_id = ANY (v_runs) AND r.run_id BETWEEN v_runs[1] AND v_runs[cardinality(v_runs)]
              AND r.state = 'failed' AND r.error LIKE 'undeliverable:%'
            RETURNING r.*
        ),
        back AS (
            INSERT INTO cronbox.outbox (outbox_id, run_id, queue, kind, message, timeout, created_at, available_at,
                                        attempts, last_error, job_id, job_name, fire_at, due_at, attempt,
                                        origin, retry_of, priority, payload, state, dispatched_at, needs, bucket)
            SELECT v.run_id, v.run_id, v.queue, 'run', v_dead_of -> v.run_id::text -> 'message',
                   coalesce((v_dead_of -> v.run_id::text ->> 'timeout')::interval, interval '5 minutes'),
                   p_now, p_now, 0, 'redriven after: ' || coalesce(v_dead_of -> v.run_id::text ->> 'last_error', '?'),
                   v.job_id, v.job_name, v.fire_at, v.due_at, v.attempt, v.origin, v.retry_of, v.priority,
                   v.payload, 'dispatched', v.dispatched_at, v.needs, v.bucket
            FROM revived v
            RETURNING 1  -- not a COPY on Citus (refused under row security): docs/citus.md
        ),
        stat AS (
            UPDATE cronbox.job_stat s SET active_runs = s.active_runs + c.n
            FROM (SELECT v.job_id, count(*)::integer AS n FROM revived v GROUP BY v.job_id) c
            WHERE (v_b IS NULL OR s.bucket = v_b) AND s.job_id = c.job_id
        )
        SELECT array_agg(v.needs) FILTER (WHERE v.needs IS NOT NULL) INTO v_needs FROM revived v;
        -- in flight again: the pool units it gave back when it failed are held again
        PERFORM cronbox.take_pool_units(v_needs, p_now);
    END LOOP;
    IF v_count > 0 THEN
        PERFORM pg_notify('cronbox_outbox', '');
    END IF;
    RETURN v_count;
END
$$;

COMMENT ON FUNCTION cronbox.redrive_at(bigint, text, boolean, timestamp with time zone) IS
'Internal (no cronbox role may execute it): the body of cronbox.redrive(bigint, text, boolean) with the time as p_now; tests use it to fix the clock. Puts dead letters back into the outbox (attempts reset): by id, by queue, or everything => true. Runs marked undeliverable go back to dispatched. Returns the count.';

ALTER FUNCTION cronbox.redrive_at(bigint, text, boolean, timestamp with time zone) OWNER TO cronbox_owner;
REVOKE ALL ON FUNCTION cronbox.redrive_at(bigint, text, boolean, timestamp with time zone) FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
