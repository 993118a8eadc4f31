-- cronbox.dispatch_plain(p_futures, p_grace, p_now, p_buckets, p_claim_at_due): dispatch's write for a plain
-- batch, the common case, in three short statements; no row when the batch is not plain (the
-- caller, cronbox.dispatch_locked, then takes its general path, which decides the same fires
-- the same way). Plain, for every fire not held meanwhile: no overlap policy of its own but
-- 'allow' (backfill), its job neither gated by a dependency nor paused (or the fire a
-- trigger() or rerun()), without pool needs, in a queue without a limit, its overlap policy
-- settled by the job alone: 'allow' or no run in flight (run),
-- 'skip' with one (skipped); and one fire per job, or else every fire 'allow' and none late
-- for the catch-up check (p_grace; early dispatch passes none). So no queue slot, pool unit,
-- hold, notification or cancellation is written, and no fire is weighed against another of
-- its job (no window over the batch).
-- The caller holds the futures' (FOR UPDATE) and the jobs' locks and calls this in a new
-- statement (snapshot taken under the locks). Writes: each run's outbox row, each skipped
-- fire's history row, the statistics (to the poller's fold, or in job_stat for jobs a policy
-- reads them for), the futures deleted; then NOTIFY cronbox_outbox. Statements as
-- dispatch_locked's on Citus: the bucket set's rows (job, job_future, job_stat, with the
-- reference tables) or the coordinator's own tables and the values read before, never both.
-- p_claim_at_due: as dispatch_locked's (early 'skip' runs flagged as they are inserted, and
-- marked on their job's statistics row by the statistics' own update).
CREATE OR REPLACE FUNCTION cronbox.dispatch_plain(
    p_futures bigint[],
    p_grace interval,
    p_now timestamptz,
    p_buckets integer[] DEFAULT NULL,
    p_claim_at_due bigint[] DEFAULT NULL
) RETURNS TABLE (dispatched integer, skipped integer, failed integer, held integer)
LANGUAGE plpgsql
SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
-- Row estimates through CTEs are rough; JIT compiling these short statements costs more than they run.
SET jit = off
SET enable_seqscan = off  -- a plan kept from an empty table: docs/architecture.md, SQL conventions
AS $$
DECLARE
    v_index integer;          -- the bucket index run ids are drawn with (one bucket, with buckets: Citus)
    v_plain boolean;
    v_fires cronbox.dispatch_fire[];  -- the batch, decided (wish: run or skip)
    v_candidates text[];      -- names of the batch's jobs whose statistics may be folded off the hot path
    v_after text[] := '{}';   -- those of them an after-job lists (their statistics are read: not folded)
    v_dispatched integer;
    v_skipped integer;
    v_gone bigint[];          -- the futures decided: deleted
    v_stat_ids bigint[];
    v_stats jsonb;            -- job -> [runs, last fire in seconds from p_now, last run, its state, failures, missed]
BEGIN
    -- 1. The batch in its bucket set: each future by key, its job and statistics by a probe
    --    (docs/architecture.md, SQL conventions 2 and 4), whether it is plain, and what its job
    --    decides of it.
    WITH
    keyed AS MATERIALIZED (
        SELECT f.future_id, f.job_id, f.fire_at, f.due_at, f.priority, f.attempt, f.origin,
               f.payload, f.retry_of, f.overlap, f.hold, f.bucket
        FROM cronbox.job_future f
        WHERE (p_buckets IS NULL OR f.bucket = ANY (p_buckets)) AND f.future_id = ANY (p_futures)
    ),
    fire AS (
        SELECT k.future_id, k.job_id, j.name, j.queue, k.fire_at, k.due_at, k.priority, k.attempt,
               k.origin, k.retry_of, coalesce(k.payload, j.payload) AS message_payload, j.timeout,
               coalesce(k.overlap, j.overlap) AS overlap, s.active_runs, k.bucket, fo.folded,
               coalesce((k.overlap IS NULL OR k.overlap = 'allow')  -- else its job's statistics are read, folded first
                        AND NOT (j.paused AND k.origin NOT IN ('manual', 'rerun'))  -- trigger(), rerun() run anyway
                        AND j.needs IS NULL
                        -- a folded job has no dependency (job_stat_folded probed for it): no second probe
                        AND (fo.folded OR NOT EXISTS (SELECT 1 FROM cronbox.job_dependency d WHERE d.job_id = k.job_id))
                        -- no queue limit at all (one probe per statement), else the job's queue's, a probe per fire
                        AND ((SELECT NOT EXISTS (SELECT 1 FROM cronbox.queue_limit))
                             OR NOT EXISTS (SELECT 1 FROM cronbox.queue_limit q WHERE q.queue = j.queue))
                        AND (coalesce(k.overlap, j.overlap) IN ('allow', 'skip') OR s.active_runs = 0), false) AS plain,
               -- with several fires of a job: catch-up (dispatch_locked's late_missed) might miss it
               p_grace IS NOT NULL AND k.due_at < p_now - p_grace AS late
        FROM keyed k
        CROSS JOIN LATERAL (SELECT j.name, j.queue, j.payload, j.timeout, j.overlap, j.paused, j.needs,
                                   j.every_mode
                            FROM cronbox.job j
                            WHERE (p_buckets IS NULL OR j.bucket = ANY (p_buckets)) AND j.job_id = k.job_id LIMIT 1) j
        CROSS JOIN LATERAL (SELECT s.active_runs FROM cronbox.job_stat s
                            WHERE (p_buckets IS NULL OR s.bucket = ANY (p_buckets)) AND s.job_id = k.job_id LIMIT 1) s
        -- OFFSET 0: evaluated once per fire (pulled up, the inlined test and its two probes were
        -- copied into every expression that reads folded)
        CROSS JOIN LATERAL (SELECT t.folded FROM cronbox.job_stat_folded(k.job_id, j.overlap, j.every_mode, j.name, '{}') t
                            OFFSET 0) fo
        WHERE k.hold IS NULL  -- held meanwhile: left alone
    )
    SELECT coalesce(bool_and(x.plain), true)
           AND (count(*) = count(DISTINCT x.job_id) OR (bool_and(x.overlap = 'allow') AND NOT bool_or(x.late))),
           -- run ids drawn in fire order
           array_agg(ROW(x.future_id, x.job_id, x.name, x.queue, x.fire_at, x.due_at, x.priority, x.attempt,
                         x.origin, x.retry_of, x.message_payload, x.timeout, x.overlap, x.active_runs, NULL,
                         NULL, NULL, NULL, NULL, NULL, NULL, x.bucket, NULL, NULL, NULL, x.folded,
                         CASE WHEN x.overlap = 'allow' OR x.active_runs = 0 THEN 'run' ELSE 'skip' END
                        )::cronbox.dispatch_fire ORDER BY x.fire_at, x.future_id),
           array_agg(x.name) FILTER (WHERE x.folded)
      INTO v_plain, v_fires, v_candidates
    FROM fire x;
    -- the general path's, and a batch of which a future was held or gone meanwhile (rare: the
    -- general path also tells which of the batch's jobs finished, gone fires included)
    IF NOT v_plain OR coalesce(cardinality(v_fires), 0) <> cardinality(p_futures) THEN
        RETURN;
    END IF;

    -- 2. Statistics no policy reads are left to the poller's fold, unless an after-job lists
    --    the job (as dispatch_locked: read from the after-job edges).
    IF cardinality(v_candidates) > 0 AND EXISTS (SELECT 1 FROM cronbox.job_after_edge) THEN  -- none: one probe
        v_after := ARRAY(SELECT DISTINCT e.upstream FROM cronbox.job_after_edge e
                         WHERE e.upstream = ANY (v_candidates));
    END IF;

    -- A batch of one bucket on a database with buckets (Citus) draws its run ids with that
    -- bucket's index (cronbox.new_bucket_run_id(bucket_index)): a report by run id then finds the
    -- run's bucket in its id (cronbox.run_bucket). Plain PostgreSQL: the plain ids, as before.
    IF cardinality(p_buckets) = 1 AND to_regclass('cronbox.bucket') IS NOT NULL THEN
        SELECT b.bucket_index INTO v_index FROM cronbox.bucket b WHERE b.bucket = p_buckets[1];
    END IF;
    -- 3. The writes outside the bucket's tables: runs' outbox rows, skipped fires' history rows,
    --    the statistics to fold; and what the bucket's rows need (step 4).
    WITH
    fire AS MATERIALIZED (
        SELECT CASE WHEN v_index IS NULL THEN cronbox.new_run_id() ELSE cronbox.new_bucket_run_id(v_index) END AS run_id,
               f.future_id, f.job_id, f.name, f.queue, f.fire_at, f.due_at,
               f.priority, f.attempt, f.origin, f.retry_of, f.message_payload, f.timeout, f.bucket, f.wish,
               f.folded AND NOT f.name = ANY (v_after) AS folded
        FROM unnest(v_fires) f
    ),
    -- a skipped fire is history at once, final (docs/architecture.md, "One row in flight")
    new_run AS (
        INSERT INTO cronbox.run (run_id, job_id, job_name, queue, fire_at, due_at, state, attempt,
                                 origin, retry_of, payload, priority, dispatched_at,
                                 finished_at, error, missed_fires, missed_last_at, needs, bucket, trouble)
        SELECT fire.run_id, fire.job_id, fire.name, fire.queue, fire.fire_at, fire.due_at, 'skipped',
               fire.attempt, fire.origin, fire.retry_of, fire.message_payload, fire.priority, NULL, p_now,
               'overlap: skipped, an earlier run of this job is unfinished', NULL, NULL, NULL, fire.bucket,
               cronbox.run_trouble('skipped')
        FROM fire
        WHERE fire.wish = 'skip'
        RETURNING 1  -- not a COPY on Citus (refused under row security): docs/citus.md
    ),
    -- a run: its outbox row carries the run until its final report (as dispatch_locked writes it)
    new_message AS (
        INSERT INTO cronbox.outbox (outbox_id, run_id, queue, kind, message, timeout, created_at, available_at,
                                    job_id, job_name, fire_at, due_at, attempt, origin, retry_of,
                                    priority, payload, state, dispatched_at, needs, bucket, claim_at_due)
        SELECT fire.run_id, fire.run_id, fire.queue, 'run', NULL::jsonb, fire.timeout, p_now, greatest(fire.due_at, p_now),
               fire.job_id, fire.name, fire.fire_at, fire.due_at, fire.attempt, fire.origin, fire.retry_of,
               fire.priority, fire.message_payload, 'dispatched',
               greatest(fire.due_at, p_now),  -- early: as of its due time
               NULL, fire.bucket,
               p_claim_at_due IS NOT NULL AND fire.due_at > p_now AND fire.job_id = ANY (p_claim_at_due)
        FROM fire
        WHERE fire.wish = 'run'
        RETURNING 1  -- not a COPY on Citus (refused under row security): docs/citus.md
    ),
    -- per job, its runs of this call (a skipped fire changes no statistic)
    per_job AS MATERIALIZED (
        SELECT fire.job_id, min(fire.bucket) AS bucket, bool_and(fire.folded) AS folded, count(*)::integer AS n_run,
               max(fire.fire_at) AS last_fire, max(fire.run_id) AS last_run,
               max(fire.due_at) FILTER (WHERE fire.job_id = ANY (p_claim_at_due)) AS early_due
        FROM fire WHERE fire.wish = 'run' GROUP BY fire.job_id
    ),
    -- the jobs whose statistics no policy reads: one row for all of them per bucket, folded by the poller
    stat_change AS (
        INSERT INTO cronbox.job_stat_change (job_ids, active, last_fire, last_run, last_state,
                                             ok, failures, crashes, missed, success_at, bucket)
        SELECT array_agg(c.job_id), array_agg(c.n_run), array_agg(c.last_fire), array_agg(c.last_run),
               array_agg('dispatched'::text), array_agg(0), array_agg(0), array_agg(0), array_agg(0::bigint), p_now,
               c.bucket
        FROM per_job c
        WHERE c.folded
        GROUP BY c.bucket  -- a row per bucket of the jobs (one on plain PostgreSQL)
        RETURNING 1  -- not a COPY on Citus (refused under row security): docs/citus.md
    ),
    -- the others', looked up by key in the update of step 4 (dispatch_locked's form: SQL conventions 1)
    counts AS MATERIALIZED (
        SELECT array_agg(c.job_id) AS ids,
               jsonb_object_agg(c.job_id::text, jsonb_build_array(
                   c.n_run, extract(epoch FROM c.last_fire - p_now), c.last_run, 'dispatched',
                   extract(epoch FROM c.early_due - p_now))) AS of
        FROM per_job c
        WHERE NOT c.folded
    )
    SELECT count(*) FILTER (WHERE fire.wish = 'run'), count(*) FILTER (WHERE fire.wish = 'skip'),
           array_agg(fire.future_id), (SELECT c.ids FROM counts c), (SELECT c.of FROM counts c)
      INTO v_dispatched, v_skipped, v_gone, v_stat_ids, v_stats
    FROM fire;

    -- 4. The bucket's rows: the futures decided go, and the statistics policies read are
    --    written (narrow, HOT: cronbox.job_stat), as dispatch_locked writes them.
    WITH gone AS (
        DELETE FROM cronbox.job_future f
        WHERE (p_buckets IS NULL OR f.bucket = ANY (p_buckets)) AND f.future_id = ANY (v_gone)
    )
    UPDATE cronbox.job_stat s SET
        active_runs = s.active_runs + (v_stats -> s.job_id::text ->> 0)::integer,
        last_fire_at = greatest(s.last_fire_at, ((p_now AT TIME ZONE 'UTC')
                                + make_interval(secs => (v_stats -> s.job_id::text ->> 1)::float8)) AT TIME ZONE 'UTC'),
        last_run_id = (v_stats -> s.job_id::text ->> 2)::bigint,
        last_run_state = v_stats -> s.job_id::text ->> 3,
        -- p_claim_at_due's run: its due time and the statistics before it (the row's old values),
        -- in this update (a second one would check the row's foreign key again: a job row lock)
        early_due_at = CASE WHEN (v_stats -> s.job_id::text ->> 4) IS NOT NULL
                            THEN ((p_now AT TIME ZONE 'UTC')
                                  + make_interval(secs => (v_stats -> s.job_id::text ->> 4)::float8)) AT TIME ZONE 'UTC'
                            ELSE s.early_due_at END,
        early_prev_fire_at = CASE WHEN (v_stats -> s.job_id::text ->> 4) IS NOT NULL THEN s.last_fire_at
                                  ELSE s.early_prev_fire_at END,
        early_prev_run_id = CASE WHEN (v_stats -> s.job_id::text ->> 4) IS NOT NULL THEN s.last_run_id
                                 ELSE s.early_prev_run_id END,
        early_prev_state = CASE WHEN (v_stats -> s.job_id::text ->> 4) IS NOT NULL THEN s.last_run_state
                                ELSE s.early_prev_state END
    WHERE (p_buckets IS NULL OR s.bucket = ANY (p_buckets)) AND s.job_id = ANY (v_stat_ids);

    -- 5. A job whose last scheduled fire was just decided has finished: the change log says so
    --    now, as on the general path (cronbox.record_finished, the one test of it).
    PERFORM cronbox.record_finished(ARRAY(SELECT DISTINCT f.job_id FROM unnest(v_fires) f), p_now, p_buckets);

    IF v_dispatched > 0 THEN
        PERFORM pg_notify('cronbox_outbox', '');
    END IF;
    RETURN QUERY SELECT v_dispatched, v_skipped, 0, 0;
END
$$;

COMMENT ON FUNCTION cronbox.dispatch_plain(bigint[], interval, timestamp with time zone, integer[], bigint[]) IS
'Internal: dispatch''s write for a plain batch (no fire with an overlap policy of its own but allow; none paused, gated, needing pools, in a limited queue or with an overlap policy of its own; each fire run, or skipped under overlap skip; one fire per job, or every fire allow and none late for p_grace), in three statements with no window over the batch; no row when the batch is not plain (cronbox.dispatch_locked then decides it in full). Called by dispatch_locked under the futures'' and jobs'' locks.';

ALTER FUNCTION cronbox.dispatch_plain(bigint[], interval, timestamp with time zone, integer[], bigint[]) OWNER TO cronbox_owner;
REVOKE ALL ON FUNCTION cronbox.dispatch_plain(bigint[], interval, timestamp with time zone, integer[], bigint[]) FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
