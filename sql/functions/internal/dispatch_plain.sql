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
-- statement (snapshot taken under the locks). Reads and decides the batch in one statement,
-- then writes it with cronbox.dispatch_plain_fires (each run's outbox row, each skipped fire's
-- history row, the statistics, the futures deleted; NOTIFY cronbox_outbox). Statements as dispatch_locked's on Citus: the bucket
-- set's rows (job, job_future, job_stat, with the reference tables) or the coordinator's own
-- tables and the values read before, never both.
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
    v_plain boolean;
    v_fires cronbox.dispatch_fire[];  -- the batch, decided (wish: run or skip)
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
               coalesce(k.overlap, j.overlap) AS overlap, s.active_runs, k.bucket, fo.folded, s.stats_from_runs,
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
        CROSS JOIN LATERAL (SELECT s.active_runs, s.stats_from_runs FROM cronbox.job_stat s
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
                         CASE WHEN x.overlap = 'allow' OR x.active_runs = 0 THEN 'run' ELSE 'skip' END,
                         x.stats_from_runs
                        )::cronbox.dispatch_fire ORDER BY x.fire_at, x.future_id)
      INTO v_plain, v_fires
    FROM fire x;
    -- the general path's, and a batch of which a future was held or gone meanwhile (rare: the
    -- general path also tells which of the batch's jobs finished, gone fires included)
    IF NOT v_plain OR coalesce(cardinality(v_fires), 0) <> cardinality(p_futures) THEN
        RETURN;
    END IF;

    -- 2. The write (cronbox.dispatch_plain_fires, early dispatch's too).
    RETURN QUERY SELECT * FROM cronbox.dispatch_plain_fires(v_fires, p_now, p_buckets, p_claim_at_due);
END
$$;

COMMENT ON FUNCTION cronbox.dispatch_plain(bigint[], interval, timestamp with time zone, integer[], bigint[]) IS
'Internal: dispatch''s write for a plain batch (no fire with an overlap policy of its own but allow; none paused, gated, needing pools, in a limited queue or with an overlap policy of its own; each fire run, or skipped under overlap skip; one fire per job, or every fire allow and none late for p_grace), in three statements with no window over the batch; no row when the batch is not plain (cronbox.dispatch_locked then decides it in full). Called by dispatch_locked under the futures'' and jobs'' locks.';

ALTER FUNCTION cronbox.dispatch_plain(bigint[], interval, timestamp with time zone, integer[], bigint[]) OWNER TO cronbox_owner;
REVOKE ALL ON FUNCTION cronbox.dispatch_plain(bigint[], interval, timestamp with time zone, integer[], bigint[]) FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
