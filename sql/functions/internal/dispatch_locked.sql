-- cronbox.dispatch_locked(p_futures, p_jobs, p_grace, p_now, p_buckets, p_claim_at_due): the one write of
-- dispatch, shared by cronbox.dispatch_at (due futures), cronbox.dispatch_ahead_at (early
-- dispatch), trigger and rerun. The caller has locked the futures (FOR UPDATE) and their jobs (the
-- job's lock: job_stat rows) and calls this in a new statement, so its snapshot, taken under the
-- locks, reads the jobs' definitions, statistics and futures as they are now (a future held
-- meanwhile is left alone). Decides per future (paused -> held; dependency gate; overlap;
-- catch-up with p_grace; queue limit; resource pools: the job's needs against the pools' free
-- units, else on_unavailable) and writes: a run's outbox row, which is the run until its final
-- report (dispatched as of the later of its due time and p_now: early runs are dispatched as of
-- their due time), skipped/missed/failed run rows (history, final at once), holds, the job's
-- statistics, queue slots, pool units (a job whose last scheduled fire it decided shows as
-- finished in the change log from its state: cronbox.job_finishes, nothing written for it).
-- Then NOTIFY cronbox_outbox. Returns the counts.
-- p_buckets: the bucket set the caller walked (cronbox.bucket_walks), NULL: any. Every statement
-- reads either that set's rows of the bucket's tables (job, job_future, job_stat: one shard's
-- where they are distributed by bucket, with reference tables beside them) or the coordinator's
-- own tables and the values read before, never both (docs/citus.md): the upstreams' names and
-- successes are read bucket set by bucket set, the after-jobs naming the batch's jobs from the
-- after-job edges (cronbox.job_after_edge: a reference table on Citus), the batch passed on as
-- an array of cronbox.dispatch_fire.
-- p_claim_at_due: jobs whose runs written here ahead of their due time are claimable only from
-- it (outbox.claim_at_due: early dispatch's 'skip' runs, which must stay withdrawable until
-- then), flagged as they are inserted (a later update of the flag, indexed by the partial
-- outbox_flagged_idx, would write every index of the outbox again), and marked on their job's
-- statistics row in the same update as the statistics (job_stat.early_due_at, the run's due
-- time, and early_prev_*, the statistics before it: cronbox.withdraw_early_skip_runs): a
-- second update of the row in the transaction would have its foreign key to cronbox.job
-- checked again, a lock written on the job row per run.
CREATE OR REPLACE FUNCTION cronbox.dispatch_locked(
    p_futures bigint[],
    p_jobs bigint[],
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
    v_dispatched integer;
    v_skipped integer;
    v_failed integer;
    v_held integer;
    v_superseded bigint[];
    v_cancel_jobs bigint[];   -- cancel_other jobs that dispatched a run while others were unfinished
    v_new_runs bigint[];      -- the runs this call dispatched for them
    v_cancel bigint[];
    v_refold bigint[];        -- jobs whose statistics a backfilled fire's own overlap policy reads
    v_notes bigint[];         -- the notifications this call wrote
    v_walks integer[];        -- bucket sets of cronbox.job, for the reads across buckets
    v_set integer[];
    v_upstreams bigint[];     -- upstreams gating the batch's jobs, not found yet
    v_upstream jsonb := '{}'; -- upstream job_id -> [name, last success]
    v_fires cronbox.dispatch_fire[];  -- the fires the overlap policy decided (wish)
    v_pre cronbox.dispatch_fire[];    -- the fires decided before it (paused, dependency: pre)
    v_candidates text[];      -- names of the batch's jobs whose statistics may be folded off the hot path
    v_after text[] := '{}';   -- those of them an after-job lists (their statistics are read: not folded)
    v_run_queues text[];      -- the queues that want runs
    v_needs boolean;          -- whether a run that wants to go needs pools
    v_limit_queues text[];    -- the limited queues concerned, locked, and their free slots
    v_limit_free integer[];
    v_pool_wait jsonb;        -- pool -> [priority, due time] of the first fire waiting for it
    v_gone bigint[];          -- the futures decided (run or history): deleted
    v_hold_ids bigint[];
    v_holds jsonb;            -- future -> [hold, hold_queue, hold_until in seconds from p_now]
    v_postponed_ids bigint[];
    v_postponed jsonb;        -- future -> its new due time in seconds from p_now
    v_stat_ids bigint[];
    v_stats jsonb;            -- job -> [runs, last fire in seconds from p_now, last run, its state, failures, missed]
    v_queue_ids text[];
    v_queue_n jsonb;          -- limited queue -> runs dispatched
BEGIN
    -- A job's early 'skip' run (decided ahead by dispatch_ahead on the premise that no run of
    -- the job is unfinished at its time) is taken back before this call may make another run
    -- of the job unfinished: its fire is then decided at its time, against this one.
    PERFORM cronbox.withdraw_early_skip_runs(p_jobs, p_now, p_buckets);
    -- The plain batch, the common case (no fire with an overlap policy of its own, no job
    -- gated, paused, needing pools or in a limited queue, ...: cronbox.dispatch_plain), is
    -- decided and written in three short statements; any other batch goes on below.
    RETURN QUERY SELECT * FROM cronbox.dispatch_plain(p_futures, p_grace, p_now, p_buckets, p_claim_at_due);
    IF FOUND THEN
        RETURN;
    END IF;

    -- A backfilled fire with an overlap policy of its own reads its job's active runs: a job
    -- whose statistics were folded off the hot path has them folded now, and written here in
    -- this call (rare: backfill(..., overlap => ...) of an 'allow' job).
    -- (the futures by key first, their overlap checked after: docs/architecture.md, SQL conventions 4)
    v_refold := ARRAY(
        WITH keyed AS MATERIALIZED (
            SELECT f.job_id, f.overlap FROM cronbox.job_future f
            WHERE (p_buckets IS NULL OR f.bucket = ANY (p_buckets)) AND f.future_id = ANY (p_futures))
        SELECT DISTINCT k.job_id FROM keyed k WHERE k.overlap IS NOT NULL AND k.overlap <> 'allow');
    IF cardinality(v_refold) > 0 THEN
        PERFORM cronbox.fold_job_stats_of(v_refold);
    END IF;

    -- 1. The upstreams gating the batch's jobs (job_dependency, read whole where it is a
    --    reference table), their names and last successes read in their own buckets: the
    --    batch's bucket set first (a DAG named under one group shares its bucket), then the
    --    others in turn until every one is found.
    v_upstreams := ARRAY(SELECT DISTINCT d.upstream_id FROM cronbox.job_dependency d WHERE d.job_id = ANY (p_jobs));
    IF cardinality(v_upstreams) > 0 THEN
        v_walks := cronbox.bucket_walks('cronbox.job');
        FOR w IN 0 .. array_length(v_walks, 1) LOOP
            IF w = 0 THEN
                CONTINUE WHEN p_buckets IS NULL;
                v_set := p_buckets;
            ELSE
                v_set := ARRAY(SELECT unnest(v_walks[w:w]));
                CONTINUE WHEN v_set <@ p_buckets;  -- read first
            END IF;
            SELECT v_upstream || coalesce(jsonb_object_agg(u.job_id::text, jsonb_build_array(u.name, s.last_success_at)), '{}')
              INTO v_upstream
            FROM cronbox.job u
            LEFT JOIN LATERAL (SELECT s.last_success_at FROM cronbox.job_stat s
                               WHERE s.bucket = ANY (v_set) AND s.job_id = u.job_id LIMIT 1) s ON true
            WHERE u.bucket = ANY (v_set) AND u.job_id = ANY (v_upstreams);
            v_upstreams := ARRAY(SELECT x FROM unnest(v_upstreams) AS x WHERE NOT v_upstream ? x::text);
            EXIT WHEN cardinality(v_upstreams) = 0;
        END LOOP;
    END IF;

    -- 2. The batch in its bucket set, and what its jobs decide of each fire: paused, the
    --    dependency gate, catch-up, the overlap policy (each job's fires are in its bucket).
    WITH
    -- By primary key alone: with `hold IS NULL` beside it, a plan made while job_future looked
    -- empty walked the whole ready index (that partial index's predicate) filtering on the ids.
    -- The hold is checked on the rows read (a materialized CTE takes no pushed-down qual).
    keyed AS MATERIALIZED (
        SELECT f.future_id, f.job_id, f.fire_at, f.due_at, f.priority, f.attempt, f.origin,
               f.payload, f.retry_of, f.overlap AS future_overlap, f.hold, f.held_since, f.bucket
        FROM cronbox.job_future f
        WHERE (p_buckets IS NULL OR f.bucket = ANY (p_buckets)) AND f.future_id = ANY (p_futures)
    ),
    picked AS MATERIALIZED (SELECT k.* FROM keyed k WHERE k.hold IS NULL),
    -- The jobs by key, each one's statistics by a probe (a join planned while job_stat looked
    -- empty walked all of it once per job: docs/architecture.md, SQL conventions). folded: no
    -- policy of its own reads its statistics; whether an after-job does is read in step 3.
    locked_job AS MATERIALIZED (
        SELECT j.job_id, j.name, j.queue, j.paused, j.overlap, j.timeout, s.active_runs,
               s.last_fire_at, j.payload, j.catchup, j.needs, j.on_unavailable, j.unavailable_timeout,
               j.retry_delay, j.retry_max_delay,
               fo.folded AND NOT (j.job_id = ANY (v_refold)) AS folded
        FROM cronbox.job j
        CROSS JOIN LATERAL (SELECT s.active_runs, s.last_fire_at FROM cronbox.job_stat s
                            WHERE (p_buckets IS NULL OR s.bucket = ANY (p_buckets)) AND s.job_id = j.job_id LIMIT 1) s
        CROSS JOIN LATERAL cronbox.job_stat_folded(j.job_id, j.overlap, j.every_mode, j.name, '{}') fo
        WHERE (p_buckets IS NULL OR j.bucket = ANY (p_buckets)) AND j.job_id = ANY (p_jobs)
    ),
    -- Paused job, then the dependency gate (upstreams without a recent enough success).
    gate AS MATERIALIZED (
        -- a backfilled future carries its request's overlap policy (migration 0171)
        SELECT p.*, j.name, j.queue, coalesce(p.future_overlap, j.overlap) AS overlap, j.timeout,
               j.active_runs, j.catchup, j.needs, j.on_unavailable, j.unavailable_timeout,
               j.retry_delay, j.retry_max_delay, j.folded,
               coalesce(p.payload, j.payload) AS message_payload,
               g.waiting, g.timeout_at,
               CASE WHEN j.paused AND p.origin NOT IN ('manual', 'rerun') THEN 'hold_paused'  -- trigger(), rerun() run anyway
                    WHEN g.waiting IS NOT NULL AND g.timeout_at <= p_now THEN 'fail_dependency'
                    WHEN g.waiting IS NOT NULL THEN 'hold_dependency' END AS pre
        FROM picked p
        JOIN locked_job j ON j.job_id = p.job_id
        LEFT JOIN LATERAL (
            SELECT string_agg(u.name, ', ' ORDER BY u.name) AS waiting,
                   min(p.due_at + d.wait_timeout) AS timeout_at
            FROM cronbox.job_dependency d
            CROSS JOIN LATERAL (SELECT v_upstream -> d.upstream_id::text ->> 0 AS name,
                                       (v_upstream -> d.upstream_id::text ->> 1)::timestamptz AS last_success_at) u
            WHERE d.job_id = p.job_id
              AND p.origin <> 'retry'  -- a retry's fire already passed the gate
              AND u.name IS NOT NULL
              AND NOT coalesce(u.last_success_at, '-infinity')
                      > coalesce(p_now - d.within, j.last_fire_at, '-infinity')
        ) g ON true
    ),
    -- The overlap policy, over the job's unfinished runs and the job's other futures in
    -- this batch (nth: order of fire; cancel_other keeps only the newest).
    -- Late scheduled fires with a newer fire of the same job due in this batch: the poller
    -- was not there at their time; the catch-up policy (not overlap) decides: missed.
    late AS (
        SELECT g.*,
               (g.catchup <> 'all' AND g.origin = 'schedule' AND g.attempt = 1
                AND p_grace IS NOT NULL AND g.due_at < p_now - p_grace
                AND g.fire_at < max(g.fire_at) OVER (PARTITION BY g.job_id)) AS late_missed
        FROM gate g
        WHERE g.pre IS NULL
    ),
    -- Backfilled fires come after the job's other fires of the batch (they queue behind
    -- regular runs); cancel_other's "newest" is the last of its own kind.
    proceed AS (
        SELECT l.*,
               row_number() OVER (PARTITION BY l.job_id, l.late_missed
                                  ORDER BY l.origin = 'backfill', l.fire_at, l.attempt, l.future_id) AS nth,
               row_number() OVER (PARTITION BY l.job_id, l.late_missed, l.origin = 'backfill'
                                  ORDER BY l.fire_at, l.attempt, l.future_id) AS kind_nth,
               count(*) OVER (PARTITION BY l.job_id, l.late_missed, l.origin = 'backfill') AS batch_n
        FROM late l
    ),
    wish AS (
        SELECT p.*,
               CASE
                   WHEN p.late_missed THEN 'miss'
                   WHEN p.overlap = 'allow' THEN 'run'
                   WHEN p.overlap = 'cancel_other' THEN CASE WHEN p.kind_nth = p.batch_n THEN 'run' ELSE 'supersede' END
                   WHEN p.active_runs = 0 AND p.nth = 1 THEN 'run'
                   WHEN p.overlap = 'skip' THEN 'skip'
                   WHEN p.overlap = 'buffer_all' THEN 'hold_overlap'
                   -- buffer_one: the first waiting fire is buffered unless one already is
                   WHEN p.nth = CASE WHEN p.active_runs = 0 THEN 2 ELSE 1 END
                        AND NOT EXISTS (SELECT 1 FROM cronbox.job_future h
                                        WHERE (p_buckets IS NULL OR h.bucket = ANY (p_buckets))
                                          AND h.job_id = p.job_id AND h.hold = 'overlap')
                       THEN 'hold_overlap'
                   ELSE 'skip'
               END AS wish
        FROM proceed p
    )
    -- (with what the next steps ask of the batch: the names whose statistics may be folded, the
    -- queues that want runs, whether a run needs pools)
    SELECT array_agg(x.f) FILTER (WHERE x.pre IS NULL), array_agg(x.f) FILTER (WHERE x.pre IS NOT NULL),
           array_agg(x.name) FILTER (WHERE x.folded),
           array_agg(DISTINCT x.queue) FILTER (WHERE x.wish = 'run'),
           coalesce(bool_or(x.wish = 'run' AND x.needs IS NOT NULL), false)
      INTO v_fires, v_pre, v_candidates, v_run_queues, v_needs
    FROM (SELECT ROW(w.future_id, w.job_id, w.name, w.queue, w.fire_at, w.due_at, w.priority, w.attempt,
                     w.origin, w.retry_of, w.message_payload, w.timeout, w.overlap, w.active_runs, w.catchup,
                     w.needs, w.on_unavailable, w.unavailable_timeout, w.held_since, w.retry_delay,
                     w.retry_max_delay, w.bucket, NULL, NULL, NULL, w.folded, w.wish, NULL)::cronbox.dispatch_fire AS f,
                 w.name, w.folded, w.queue, w.wish, w.needs, NULL::text AS pre
          FROM wish w
          UNION ALL
          SELECT ROW(g.future_id, g.job_id, g.name, g.queue, g.fire_at, g.due_at, g.priority, g.attempt,
                     g.origin, g.retry_of, g.message_payload, g.timeout, g.overlap, g.active_runs, g.catchup,
                     g.needs, g.on_unavailable, g.unavailable_timeout, g.held_since, g.retry_delay,
                     g.retry_max_delay, g.bucket, g.waiting, g.timeout_at, g.pre, g.folded, NULL, NULL)::cronbox.dispatch_fire,
                 g.name, g.folded, g.queue, NULL, g.needs, g.pre
          FROM gate g
          WHERE g.pre IS NOT NULL) x;
    IF v_fires IS NULL AND v_pre IS NULL THEN
        RETURN QUERY SELECT 0, 0, 0, 0;  -- every future held or gone meanwhile
        RETURN;
    END IF;

    -- 3. Statistics no policy reads are left to the poller's fold (cronbox.job_stat_change),
    --    unless an after-job lists the job (a success of its fires the after-job, which reads
    --    it: cronbox.job_stat_folded). Which of them an after-job lists: the after-job edges
    --    (cronbox.job_after_edge, one probe of its key per name), not the after-jobs' lists
    --    (a walk over every after-job of every bucket).
    IF cardinality(v_candidates) > 0 AND EXISTS (SELECT 1 FROM cronbox.job_after_edge) THEN  -- none: one probe
        v_after := ARRAY(SELECT DISTINCT e.upstream FROM cronbox.job_after_edge e
                         WHERE e.upstream = ANY (v_candidates));
    END IF;

    -- 4. The queue limits concerned, locked in a fixed order (before the pools: the order
    --    every dispatch takes them in).
    IF cardinality(v_run_queues) > 0 THEN
        SELECT array_agg(q.queue ORDER BY q.queue), array_agg(q.free ORDER BY q.queue)
          INTO v_limit_queues, v_limit_free
        FROM (SELECT q.queue, q.max_running - q.running AS free
              FROM cronbox.queue_limit q
              WHERE q.queue = ANY (v_run_queues)
              ORDER BY q.queue
              FOR NO KEY UPDATE) q;
        -- The first fire already waiting for each pool the runs may need, in (priority, due
        -- time) order, in this bucket set (job_future_pool_held_idx): a fire never takes units
        -- ahead of one that waits before it.
        IF v_needs THEN
            SELECT jsonb_object_agg(k.pool, jsonb_build_array(w.priority, w.due_at)) INTO v_pool_wait
            FROM (SELECT DISTINCT e.key AS pool
                  FROM unnest(v_fires) f CROSS JOIN LATERAL jsonb_each(f.needs) e
                  WHERE f.wish = 'run' AND f.needs IS NOT NULL) k
            CROSS JOIN LATERAL (SELECT h.priority, h.due_at FROM cronbox.job_future h
                                WHERE (p_buckets IS NULL OR h.bucket = ANY (p_buckets))
                                  AND h.hold = 'pool' AND h.hold_queue = k.pool
                                ORDER BY h.priority, h.due_at LIMIT 1) w;
        END IF;
    END IF;

    -- A batch of one bucket on a database with buckets (Citus) draws its run ids with that
    -- bucket's index (cronbox.new_bucket_run_id(bucket_index)): a report by run id then finds the
    -- run's bucket in its id (cronbox.run_bucket). Plain PostgreSQL: the plain ids, as before.
    IF cardinality(p_buckets) = 1 AND to_regclass('cronbox.bucket') IS NOT NULL THEN
        SELECT b.bucket_index INTO v_index FROM cronbox.bucket b WHERE b.bucket = p_buckets[1];
    END IF;
    -- 5. The rest of the decision (queue limit, pools) and the writes outside the bucket's
    --    tables: runs, outbox rows, statistics changes to fold, pool units.
    WITH
    -- (each array read once, in its one place: no copy of the batch materialized)
    wish AS (
        SELECT f.future_id, f.job_id, f.name, f.queue, f.fire_at, f.due_at, f.priority, f.attempt,
               f.origin, f.retry_of, f.message_payload, f.timeout, f.overlap, f.active_runs, f.catchup,
               f.needs, f.on_unavailable, f.unavailable_timeout, f.held_since, f.retry_delay,
               f.retry_max_delay, f.bucket, f.waiting, f.timeout_at, f.pre,
               f.folded AND NOT f.name = ANY (v_after) AS folded, f.wish
        FROM unnest(v_fires) f
    ),
    gate AS (
        SELECT f.future_id, f.job_id, f.name, f.queue, f.fire_at, f.due_at, f.priority, f.attempt,
               f.origin, f.retry_of, f.message_payload, f.timeout, f.overlap, f.active_runs, f.catchup,
               f.needs, f.on_unavailable, f.unavailable_timeout, f.held_since, f.retry_delay,
               f.retry_max_delay, f.bucket, f.waiting, f.timeout_at, f.pre,
               f.folded AND NOT f.name = ANY (v_after) AS folded, f.wish
        FROM unnest(v_pre) f
    ),
    -- Free slots of the limited queues concerned (locked above).
    limited AS MATERIALIZED (
        SELECT l.queue, l.free FROM unnest(v_limit_queues, v_limit_free) AS l(queue, free)
    ),
    placed AS (
        SELECT w.*,
               CASE WHEN w.wish <> 'run' OR l.queue IS NULL THEN w.wish
                    WHEN row_number() OVER (PARTITION BY w.queue, w.wish = 'run'
                                            ORDER BY w.priority, w.due_at, w.future_id) <= l.free
                        THEN 'run'
                    ELSE 'hold_queue' END AS placed
        FROM wish w
        LEFT JOIN limited l ON l.queue = w.queue
    ),
    -- Resource pools (only runs of jobs with needs): the units each would take, per pool.
    pool_ask AS MATERIALIZED (
        SELECT pl.future_id, pl.priority, pl.due_at, e.key AS pool, e.value::text::bigint AS units
        FROM placed pl CROSS JOIN LATERAL jsonb_each(pl.needs) e
        WHERE pl.placed = 'run' AND pl.needs IS NOT NULL
    ),
    -- Those pools, locked in name order (after the queue_limit rows), with their free units
    -- and the first fire already waiting for them (step 4).
    pool_free AS MATERIALIZED (
        SELECT p.name, p.capacity, p.in_use, p.capacity - p.in_use AS free, w.priority AS waiting_priority,
               w.due_at AS waiting_due
        FROM cronbox.pool p
        CROSS JOIN LATERAL (SELECT (v_pool_wait -> p.name ->> 0)::integer AS priority,
                                   (v_pool_wait -> p.name ->> 1)::timestamptz AS due_at) w
        WHERE p.name = ANY (ARRAY(SELECT DISTINCT a.pool FROM pool_ask a))
        ORDER BY p.name
        FOR NO KEY UPDATE OF p
    ),
    -- A run goes when each of its pools has room for it and for every run before it in
    -- priority order (over-counting those another pool stops: never more than capacity).
    pool_fit AS MATERIALIZED (
        SELECT a.future_id,
               bool_and(a.ok) AS fits,
               min(a.pool) FILTER (WHERE NOT a.ok) AS pool,
               string_agg(CASE WHEN NOT a.ok THEN CASE
                   WHEN a.free IS NULL THEN format('no pool %s', a.pool)
                   WHEN a.units > a.capacity THEN format('pool %s has a capacity of %s units, needs %s', a.pool, a.capacity, a.units)
                   WHEN a.upto <= a.free THEN format('pool %s: fires before it (priority %s) wait for it first', a.pool, a.waiting_priority)
                   ELSE format('pool %s: %s of %s units free, needs %s', a.pool,
                               greatest(a.free - (a.upto - a.units), 0), a.capacity, a.units) END END,
                   '; ' ORDER BY a.pool) AS why
        FROM (SELECT a.*, f.capacity, f.free, f.waiting_priority,
                     coalesce(a.upto <= f.free AND (f.waiting_priority IS NULL
                                                    OR (a.priority, a.due_at) < (f.waiting_priority, f.waiting_due)), false) AS ok
              FROM (SELECT x.*, sum(x.units) OVER (PARTITION BY x.pool ORDER BY x.priority, x.due_at, x.future_id) AS upto
                    FROM pool_ask x) a
              LEFT JOIN pool_free f ON f.name = a.pool) a
        GROUP BY a.future_id
    ),
    -- What a run does when its pools are short: the job's on_unavailable, until
    -- unavailable_timeout after it first waited (then it fails).
    -- (looked up by id in one JSON value, not joined: the batch keeps its order, and the run
    -- ids their fire order)
    short AS MATERIALIZED (
        SELECT jsonb_object_agg(pf.future_id::text, jsonb_build_array(pf.pool, pf.why)) AS of
        FROM pool_fit pf WHERE NOT pf.fits
    ),
    pooled AS (
        SELECT x.*,
               CASE WHEN x.short_pool IS NULL THEN x.placed
                    WHEN x.on_unavailable = 'fail'
                         OR coalesce(x.held_since, x.due_at) + x.unavailable_timeout <= p_now THEN 'fail_unavailable'
                    WHEN x.on_unavailable = 'retry' THEN 'retry_pool'
                    ELSE 'hold_pool' END AS placed2
        FROM (SELECT pl.*, s.short ->> 0 AS short_pool, s.short ->> 1 AS why,
                     coalesce(pl.held_since, pl.due_at) + pl.unavailable_timeout AS pool_timeout_at
              FROM placed pl
              CROSS JOIN LATERAL (SELECT CASE WHEN pl.needs IS NOT NULL AND pl.placed = 'run'
                                              THEN (SELECT short.of FROM short) -> pl.future_id::text END AS short) s) x
    ),
    -- A job whose run waits for a queue slot or a pool keeps its other fires waiting with it.
    outcome AS MATERIALIZED (
        SELECT pl.future_id, pl.job_id, pl.name, pl.queue, pl.fire_at, pl.due_at, pl.priority,
               pl.attempt, pl.origin, pl.retry_of, pl.message_payload, pl.timeout, pl.overlap,
               pl.active_runs, pl.catchup, NULL::text AS waiting,
               CASE WHEN pl.placed2 = 'hold_pool' THEN pl.pool_timeout_at END AS timeout_at,
               CASE WHEN pl.placed2 IN ('skip', 'supersede', 'hold_overlap')
                         AND bool_or(pl.placed2 = 'hold_queue') OVER (PARTITION BY pl.job_id)
                    THEN 'hold_queue'
                    WHEN pl.placed2 IN ('skip', 'supersede', 'hold_overlap')
                         AND bool_or(pl.placed2 IN ('hold_pool', 'retry_pool')) OVER (PARTITION BY pl.job_id)
                    THEN 'hold_pool'
                    ELSE pl.placed2 END AS act,
               pl.needs, coalesce(pl.short_pool, max(pl.short_pool) OVER (PARTITION BY pl.job_id)) AS pool,
               pl.why, pl.held_since, pl.retry_delay, pl.retry_max_delay, pl.on_unavailable, pl.folded,
               pl.bucket
        FROM pooled pl
        UNION ALL
        SELECT g.future_id, g.job_id, g.name, g.queue, g.fire_at, g.due_at, g.priority,
               g.attempt, g.origin, g.retry_of, g.message_payload, g.timeout, g.overlap,
               g.active_runs, g.catchup, g.waiting, g.timeout_at, g.pre,
               NULL::jsonb, NULL::text, NULL::text, NULL::timestamptz, NULL::interval, NULL::interval, NULL::text,
               g.folded, g.bucket
        FROM gate g
        WHERE g.pre IS NOT NULL
    ),
    fire AS MATERIALIZED (
        SELECT CASE WHEN v_index IS NULL THEN cronbox.new_run_id() ELSE cronbox.new_bucket_run_id(v_index) END AS run_id, o.*
        FROM outcome o
        WHERE o.act IN ('run', 'skip', 'supersede', 'fail_dependency', 'fail_unavailable', 'miss')
    ),
    -- Fires that never run are history at once, final; a run is its outbox row until its
    -- final report (docs/architecture.md, "One row in flight").
    new_run AS (
        INSERT INTO cronbox.run (run_id, job_id, job_name, queue, fire_at, due_at, state, attempt,
                                 origin, retry_of, payload, priority, dispatched_at,
                                 finished_at, error, missed_fires, missed_last_at, needs, bucket, trouble)
        SELECT fire.run_id, fire.job_id, fire.name, fire.queue, fire.fire_at, fire.due_at,
               s.state,
               fire.attempt, fire.origin, fire.retry_of, fire.message_payload, fire.priority,
               NULL, p_now,
               CASE fire.act
                   WHEN 'skip' THEN 'overlap: skipped, an earlier run of this job is unfinished'
                   WHEN 'supersede' THEN 'overlap: superseded by a newer fire (cancel_other)'
                   WHEN 'fail_dependency' THEN format(
                       'dependency: no recent enough success of %s after waiting %s (wait_timeout)',
                       fire.waiting, p_now - fire.due_at)
                   WHEN 'miss' THEN format(
                       'missed: not dispatched within the misfire grace of %s (the poller was down or busy), a newer fire of this job is due (catch-up policy %s)',
                       p_grace, fire.catchup)
                   WHEN 'fail_unavailable' THEN CASE WHEN fire.on_unavailable = 'fail'
                       THEN format('unavailable: %s (on_unavailable fail)', fire.why)
                       ELSE format('unavailable: %s after waiting %s (unavailable_timeout)', fire.why,
                                   p_now - coalesce(fire.held_since, fire.due_at)) END
               END,
               CASE WHEN fire.act = 'miss' THEN 1 END,
               CASE WHEN fire.act = 'miss' THEN fire.fire_at END,
               NULL, fire.bucket, cronbox.run_trouble(s.state)
        FROM fire
        CROSS JOIN LATERAL (SELECT CASE fire.act WHEN 'fail_dependency' THEN 'failed'
                                                 WHEN 'fail_unavailable' THEN 'failed'
                                                 WHEN 'miss' THEN 'missed' ELSE 'skipped' END AS state) s
        WHERE fire.act <> 'run'
        RETURNING 1  -- not a COPY on Citus (refused under row security): docs/citus.md
    ),
    new_message AS (
        -- A run: its outbox row carries the run (outbox_id = run_id); no message, the claim
        -- builds it from the row; available at its due time (early dispatch) or now.
        INSERT INTO cronbox.outbox (outbox_id, run_id, queue, kind, message, timeout, created_at, available_at,
                                    job_id, job_name, fire_at, due_at, attempt, origin, retry_of,
                                    priority, payload, state, dispatched_at, needs, bucket, claim_at_due)
        SELECT fire.run_id, fire.run_id, fire.queue, 'run', NULL::jsonb, fire.timeout, p_now, greatest(fire.due_at, p_now),
               fire.job_id, fire.name, fire.fire_at, fire.due_at, fire.attempt, fire.origin, fire.retry_of,
               fire.priority, fire.message_payload, 'dispatched',
               greatest(fire.due_at, p_now),  -- early: as of its due time
               fire.needs,  -- the units it holds until it ends
               fire.bucket,
               p_claim_at_due IS NOT NULL AND fire.due_at > p_now AND fire.job_id = ANY (p_claim_at_due)
        FROM fire
        WHERE fire.act = 'run'
        RETURNING 1  -- not a COPY on Citus (refused under row security): docs/citus.md
    ),
    new_note AS (
        INSERT INTO cronbox.outbox (run_id, queue, kind, message, timeout, created_at, available_at, bucket)
        SELECT fire.run_id, 'cronbox.notifications', 'notification',
               jsonb_build_object(
                   'event', 'dependency_timeout', 'job', fire.name, 'run_id', fire.run_id,
                   'fire_at', fire.fire_at, 'waiting_for', fire.waiting, 'at', p_now,
                   'error', format('dependency: no recent enough success of %s', fire.waiting),
                   'idempotency_key', 'dependency_timeout:' || fire.run_id),
               interval '5 minutes', p_now, p_now, fire.bucket
        FROM fire
        WHERE fire.act = 'fail_dependency'
        UNION ALL
        SELECT fire.run_id, 'cronbox.notifications', 'notification',
               jsonb_build_object(
                   'event', 'unavailable', 'job', fire.name, 'run_id', fire.run_id,
                   'fire_at', fire.fire_at, 'pool', fire.pool, 'needs', fire.needs, 'at', p_now,
                   'error', format('unavailable: %s', fire.why),
                   'idempotency_key', 'unavailable:' || fire.run_id),
               interval '5 minutes', p_now, p_now, fire.bucket
        FROM fire
        WHERE fire.act = 'fail_unavailable'
        RETURNING outbox_id
    ),
    -- Per job, the counts of this call.
    per_job AS MATERIALIZED (
        SELECT fire.job_id, min(fire.bucket) AS bucket, bool_and(fire.folded) AS folded,
               count(*) FILTER (WHERE fire.act = 'miss') AS n_missed,
               count(*) FILTER (WHERE fire.act = 'run') AS n_run,
               count(*) FILTER (WHERE fire.act IN ('fail_dependency', 'fail_unavailable')) AS n_failed,
               max(fire.fire_at) FILTER (WHERE fire.act = 'run') AS last_fire,
               -- p_claim_at_due: the due time its run is marked with (job_stat.early_due_at)
               max(fire.due_at) FILTER (WHERE fire.act = 'run' AND fire.job_id = ANY (p_claim_at_due)) AS early_due,
               max(fire.run_id) FILTER (WHERE fire.act IN ('run', 'fail_dependency', 'fail_unavailable')) AS last_run,
               (array_agg(CASE fire.act WHEN 'run' THEN 'dispatched' ELSE 'failed' END
                          ORDER BY fire.run_id DESC)
                    FILTER (WHERE fire.act IN ('run', 'fail_dependency', 'fail_unavailable')))[1] AS last_state
        FROM fire GROUP BY fire.job_id
    ),
    -- The jobs whose statistics no policy reads: one row for all of them per bucket, folded into job_stat
    -- by the poller within a second (cronbox.fold_job_stats).
    stat_change AS (
        INSERT INTO cronbox.job_stat_change (job_ids, active, last_fire, last_run, last_state,
                                             ok, failures, crashes, missed, success_at, bucket)
        SELECT array_agg(c.job_id), array_agg(c.n_run::integer), array_agg(c.last_fire),
               array_agg(c.last_run), array_agg(c.last_state), array_agg(0),
               array_agg(c.n_failed::integer), array_agg(0), array_agg(c.n_missed), p_now,
               c.bucket
        FROM per_job c
        WHERE (c.n_run > 0 OR c.n_failed > 0 OR c.n_missed > 0) AND c.folded
        GROUP BY c.bucket  -- a row per bucket of the jobs (one on plain PostgreSQL)
        RETURNING 1  -- not a COPY on Citus (refused under row security): docs/citus.md
    ),
    -- The units the new runs hold (only runs of jobs with needs; the rows locked in pool_free).
    pool_counts AS (
        UPDATE cronbox.pool p SET in_use = p.in_use + c.n, updated_at = p_now
        FROM (SELECT e.key AS pool, sum(e.value::text::bigint) AS n
              FROM fire CROSS JOIN LATERAL jsonb_each(fire.needs) e
              WHERE fire.act = 'run' AND fire.needs IS NOT NULL
              GROUP BY e.key) c
        WHERE p.name = c.pool
    ),
    -- The writes to the bucket's rows (step 6) reach them by key (= ANY) and look their values
    -- up in one JSON value by key (a binary search), built once here, never by a join: with a
    -- generic plan a join to a CTE became a nested loop whose every probe sorted the id array
    -- again, quadratic (~40 % of a 1,000-run dispatch in perf); on Citus an array subscripted
    -- by a column in an UPDATE's SET crashes the node. Times as seconds from p_now: the update
    -- then calls nothing but IMMUTABLE functions on a row's columns (docs/citus.md).
    holds AS MATERIALIZED (
        SELECT array_agg(o.future_id) AS ids,
               jsonb_object_agg(o.future_id::text, jsonb_build_array(
                   CASE o.act WHEN 'hold_paused' THEN 'paused' WHEN 'hold_dependency' THEN 'dependency'
                              WHEN 'hold_queue' THEN 'queue_limit' WHEN 'hold_pool' THEN 'pool' ELSE 'overlap' END,
                   CASE WHEN o.act = 'hold_queue' THEN o.queue WHEN o.act = 'hold_pool' THEN o.pool END,
                   -- the backstop: re-examined then whatever happens (a dependency at its timeout)
                   extract(epoch FROM least(p_now + interval '30 seconds', o.timeout_at) - p_now))) AS of
        FROM outcome o
        WHERE o.act LIKE 'hold\_%'
    ),
    -- on_unavailable = 'retry': the fire is put back, due again after the job's retry delay,
    -- doubling with the time it has waited (capped at retry_max_delay).
    postponed AS MATERIALIZED (
        SELECT array_agg(o.future_id) AS ids,
               jsonb_object_agg(o.future_id::text, extract(epoch FROM
                   p_now + least(greatest(o.retry_delay, p_now - coalesce(o.held_since, p_now)), o.retry_max_delay)
                   - p_now)) AS of
        FROM outcome o WHERE o.act = 'retry_pool'
    ),
    counts AS MATERIALIZED (
        SELECT array_agg(c.job_id) AS ids,
               jsonb_object_agg(c.job_id::text, jsonb_build_array(
                   c.n_run, extract(epoch FROM c.last_fire - p_now), c.last_run, c.last_state, c.n_failed, c.n_missed,
                   extract(epoch FROM c.early_due - p_now))) AS of
        FROM per_job c
        WHERE (c.n_run > 0 OR c.n_failed > 0 OR c.n_missed > 0) AND NOT c.folded
    ),
    queue_n AS MATERIALIZED (
        SELECT array_agg(c.queue) AS ids, jsonb_object_agg(c.queue, c.n) AS of
        FROM (SELECT fire.queue, count(*) AS n FROM fire
              WHERE fire.act = 'run' AND fire.queue = ANY (v_limit_queues) GROUP BY fire.queue) c
    )
    SELECT count(*) FILTER (WHERE o.act = 'run'),
           count(*) FILTER (WHERE o.act IN ('skip', 'supersede', 'miss')),
           count(*) FILTER (WHERE o.act IN ('fail_dependency', 'fail_unavailable')),
           count(*) FILTER (WHERE o.act LIKE 'hold\_%' OR o.act = 'retry_pool'),
           (SELECT array_agg(DISTINCT fire.job_id) FROM fire
            WHERE fire.act = 'run' AND fire.overlap = 'cancel_other' AND fire.active_runs > 0),
           (SELECT array_agg(fire.run_id) FROM fire
            WHERE fire.act = 'run' AND fire.overlap = 'cancel_other' AND fire.active_runs > 0),
           (SELECT array_agg(n.outbox_id) FROM new_note n),
           (SELECT array_agg(fire.future_id) FROM fire),
           (SELECT h.ids FROM holds h), (SELECT h.of FROM holds h),
           (SELECT p.ids FROM postponed p), (SELECT p.of FROM postponed p),
           (SELECT c.ids FROM counts c), (SELECT c.of FROM counts c),
           (SELECT q.ids FROM queue_n q), (SELECT q.of FROM queue_n q)
      INTO v_dispatched, v_skipped, v_failed, v_held, v_cancel_jobs, v_new_runs, v_notes,
           v_gone, v_hold_ids, v_holds, v_postponed_ids, v_postponed, v_stat_ids, v_stats,
           v_queue_ids, v_queue_n
    FROM outcome o;

    -- 6. The bucket's rows: the futures decided go (a run is its outbox row until its final
    --    report, docs/architecture.md "One row in flight"), the others are held or put back,
    --    and the statistics policies read are written (narrow, HOT: cronbox.job_stat).
    WITH
    gone AS (
        DELETE FROM cronbox.job_future f
        WHERE (p_buckets IS NULL OR f.bucket = ANY (p_buckets)) AND f.future_id = ANY (v_gone)
    ),
    held AS (
        UPDATE cronbox.job_future f SET
            hold = v_holds -> f.future_id::text ->> 0,
            hold_queue = v_holds -> f.future_id::text ->> 1,
            held_since = coalesce(f.held_since, p_now),
            hold_until = ((p_now AT TIME ZONE 'UTC')
                          + make_interval(secs => (v_holds -> f.future_id::text ->> 2)::float8)) AT TIME ZONE 'UTC'
        WHERE (p_buckets IS NULL OR f.bucket = ANY (p_buckets)) AND f.future_id = ANY (v_hold_ids)
    ),
    postponed AS (
        UPDATE cronbox.job_future f SET
            due_at = ((p_now AT TIME ZONE 'UTC')
                      + make_interval(secs => (v_postponed ->> f.future_id::text)::float8)) AT TIME ZONE 'UTC',
            held_since = coalesce(f.held_since, p_now)
        WHERE (p_buckets IS NULL OR f.bucket = ANY (p_buckets)) AND f.future_id = ANY (v_postponed_ids)
    )
    UPDATE cronbox.job_stat s SET
        active_runs = s.active_runs + (v_stats -> s.job_id::text ->> 0)::integer,
        last_fire_at = CASE WHEN (v_stats -> s.job_id::text ->> 0)::integer > 0
                            THEN greatest(s.last_fire_at, ((p_now AT TIME ZONE 'UTC')
                                 + make_interval(secs => (v_stats -> s.job_id::text ->> 1)::float8)) AT TIME ZONE 'UTC')
                            ELSE s.last_fire_at END,
        last_run_id = coalesce((v_stats -> s.job_id::text ->> 2)::bigint, s.last_run_id),
        last_run_state = coalesce(v_stats -> s.job_id::text ->> 3, s.last_run_state),
        consecutive_failures = s.consecutive_failures + (v_stats -> s.job_id::text ->> 4)::integer,
        missed_count = s.missed_count + (v_stats -> s.job_id::text ->> 5)::integer,
        -- p_claim_at_due's run: its due time and the statistics before it (the row's old values)
        early_due_at = CASE WHEN (v_stats -> s.job_id::text ->> 6) IS NOT NULL
                            THEN ((p_now AT TIME ZONE 'UTC')
                                  + make_interval(secs => (v_stats -> s.job_id::text ->> 6)::float8)) AT TIME ZONE 'UTC'
                            ELSE s.early_due_at END,
        early_prev_fire_at = CASE WHEN (v_stats -> s.job_id::text ->> 6) IS NOT NULL THEN s.last_fire_at
                                  ELSE s.early_prev_fire_at END,
        early_prev_run_id = CASE WHEN (v_stats -> s.job_id::text ->> 6) IS NOT NULL THEN s.last_run_id
                                 ELSE s.early_prev_run_id END,
        early_prev_state = CASE WHEN (v_stats -> s.job_id::text ->> 6) IS NOT NULL THEN s.last_run_state
                                ELSE s.early_prev_state END
    WHERE (p_buckets IS NULL OR s.bucket = ANY (p_buckets)) AND s.job_id = ANY (v_stat_ids);

    -- 7. The limited queues' running counts (their rows locked in step 4).
    IF v_queue_ids IS NOT NULL THEN
        UPDATE cronbox.queue_limit q SET running = q.running + (v_queue_n ->> q.queue)::integer, updated_at = p_now
        WHERE q.queue = ANY (v_queue_ids);
    END IF;

    -- the jobs' own recipients of these notifications (job.notify)
    IF v_notes IS NOT NULL THEN
        PERFORM cronbox.notify_stakeholders(v_notes);
    END IF;

    -- cancel_other: the job's unfinished runs before this call's are asked to stop (heartbeat
    -- answers 'cancel'). Statements of their own, run only when such a job dispatched: inside the
    -- one above, the walk of the job's history and the update named cronbox.run with no bounds
    -- known when the kept plan starts, so every call started a scan of every run partition
    -- (docs/architecture.md, SQL conventions 6). The jobs are locked (the caller), so the runs
    -- unfinished now are those unfinished before this call plus the ones it just dispatched.
    IF v_cancel_jobs IS NOT NULL THEN
        v_cancel := ARRAY(
            SELECT u.run_id
            FROM unnest(v_cancel_jobs) AS c(job_id)
            CROSS JOIN LATERAL cronbox.job_unfinished_runs(c.job_id) u
            WHERE NOT u.cancel_requested AND NOT (u.run_id = ANY (v_new_runs)));
        WITH cancel_others AS (
            UPDATE cronbox.outbox o SET cancel_requested = true
            WHERE o.outbox_id = ANY (v_cancel) AND o.kind = 'run'
              AND NOT o.cancel_requested
            RETURNING o.outbox_id, o.state
        )
        SELECT array_agg(c.outbox_id) FILTER (WHERE c.state = 'dispatched') INTO v_superseded
        FROM cancel_others c;
    END IF;

    -- cancel_other: a superseded run whose message is still in the outbox never reaches a worker.
    IF v_superseded IS NOT NULL THEN
        PERFORM cronbox.withdraw_superseded_runs(v_superseded, p_now);
    END IF;

    IF v_dispatched > 0 OR v_failed > 0 THEN
        PERFORM pg_notify('cronbox_outbox', '');
    END IF;
    RETURN QUERY SELECT v_dispatched, v_skipped, v_failed, v_held;
END
$$;

COMMENT ON FUNCTION cronbox.dispatch_locked(bigint[], bigint[], interval, timestamp with time zone, integer[], bigint[]) IS
'Internal: the write shared by dispatch, early dispatch, trigger and rerun. For futures and jobs the caller locked (in the bucket set p_buckets, NULL: any), decides (paused, dependency gate, overlap, catch-up with p_grace, queue limit, pools) and writes each run''s outbox row (the run in flight, dispatched as of the later of the due time and p_now), skipped/missed/failed runs, holds, job statistics, queue slots and pool units, in statements that each read either the bucket set''s rows or the coordinator''s own tables, never both (single-shard on Citus). Returns the counts.';

ALTER FUNCTION cronbox.dispatch_locked(bigint[], bigint[], interval, timestamp with time zone, integer[], bigint[]) OWNER TO cronbox_owner;
REVOKE ALL ON FUNCTION cronbox.dispatch_locked(bigint[], bigint[], interval, timestamp with time zone, integer[], bigint[]) FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
