-- cronbox.dispatch_locked(p_futures, p_jobs, p_grace, p_now): the one write of dispatch, shared
-- by cronbox.dispatch_at (due futures) and cronbox.dispatch_ahead_at (early dispatch). The
-- caller has locked the futures (FOR UPDATE) and their jobs (the job's lock: job_stat rows) and
-- calls this in a new statement, so its snapshot, taken under the locks, reads the jobs'
-- definitions, statistics and futures as they are now (a future held meanwhile is left alone). Decides
-- per future (paused -> held; dependency gate; overlap; catch-up with p_grace; queue limit;
-- resource pools: the job's needs against the pools' free units, else on_unavailable)
-- and writes in one statement: a run's outbox row, which is the run until its final report
-- (dispatched as of the later of its due time and p_now: early runs are dispatched as of their
-- due time), skipped/missed/failed run rows (history, final at once),
-- holds, the job's statistics, queue slots, pool units. Then NOTIFY cronbox_outbox. Returns the counts.
-- p_buckets: the bucket set the caller walked (cronbox.bucket_walks): its reads and writes of the
-- futures name it, so on a job_future distributed by bucket each is one shard's; NULL: any.
CREATE OR REPLACE FUNCTION cronbox.dispatch_locked(
    p_futures bigint[],
    p_jobs bigint[],
    p_grace interval,
    p_now timestamptz,
    p_buckets integer[] DEFAULT NULL
) RETURNS TABLE (dispatched integer, skipped integer, failed integer, held integer)
LANGUAGE plpgsql
SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
-- Row estimates through CTEs are rough; JIT compiling this short statement costs more than it runs.
SET jit = off
SET enable_seqscan = off  -- a plan kept from an empty table: docs/architecture.md, SQL conventions
AS $$
DECLARE
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
BEGIN
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
    -- The names after-jobs list (upstreams: a success of theirs fires the after-job), read once
    -- per call: such a job's statistics are written where they are read (cronbox.job_stat_folded).
    upstream AS MATERIALIZED (
        SELECT coalesce(array_agg(DISTINCT u.name), '{}') AS names
        FROM cronbox.job a CROSS JOIN LATERAL unnest(a.after) AS u(name)
        WHERE a.after IS NOT NULL
    ),
    -- The jobs by key, each one's statistics by a probe (a join planned while job_stat looked
    -- empty walked all of it once per job: docs/architecture.md, SQL conventions).
    locked_job AS MATERIALIZED (
        SELECT j.job_id, j.name, j.queue, j.paused, j.overlap, j.timeout, s.active_runs,
               s.last_fire_at, j.payload, j.catchup, j.needs, j.on_unavailable, j.unavailable_timeout,
               j.retry_delay, j.retry_max_delay,
               -- statistics no policy reads: left to the poller's fold (cronbox.job_stat_change)
               fo.folded AND NOT (j.job_id = ANY (v_refold)) AS folded
        FROM cronbox.job j
        CROSS JOIN LATERAL (SELECT s.active_runs, s.last_fire_at FROM cronbox.job_stat s
                            WHERE (p_buckets IS NULL OR s.bucket = ANY (p_buckets)) AND s.job_id = j.job_id LIMIT 1) s
        -- the names as a column of the one-row CTE, not a sub-select argument: a function
        -- with a sub-select among its arguments is never inlined, and ran as a SQL function
        -- call (its statement started) per job
        CROSS JOIN upstream u
        CROSS JOIN LATERAL cronbox.job_stat_folded(j.job_id, j.overlap, j.every_mode, j.name, u.names) fo
        WHERE j.job_id = ANY (p_jobs)
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
            CROSS JOIN LATERAL (
                SELECT u.name, (SELECT s.last_success_at FROM cronbox.job_stat s
                                WHERE s.job_id = u.job_id) AS last_success_at
                FROM cronbox.job u WHERE u.job_id = d.upstream_id LIMIT 1) u
            WHERE d.job_id = p.job_id
              AND p.origin <> 'retry'  -- a retry's fire already passed the gate
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
                                        WHERE h.job_id = p.job_id AND h.hold = 'overlap')
                       THEN 'hold_overlap'
                   ELSE 'skip'
               END AS wish
        FROM proceed p
    ),
    -- Free slots of the limited queues concerned, locked in a fixed order.
    limited AS MATERIALIZED (
        SELECT q.queue, q.max_running - q.running AS free
        FROM cronbox.queue_limit q
        WHERE q.queue IN (SELECT w.queue FROM wish w WHERE w.wish = 'run')
        ORDER BY q.queue
        FOR NO KEY UPDATE
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
    -- Those pools, locked in name order (after the queue_limit rows: placed reads them), with
    -- their free units and the first fire already waiting for them, in (priority, due time)
    -- order (a fire never takes units ahead of one that waits before it: job_future_pool_held_idx).
    pool_free AS MATERIALIZED (
        SELECT p.name, p.capacity, p.in_use, p.capacity - p.in_use AS free, w.priority AS waiting_priority,
               w.due_at AS waiting_due
        FROM cronbox.pool p
        LEFT JOIN LATERAL (SELECT h.priority, h.due_at FROM cronbox.job_future h
                           WHERE h.hold = 'pool' AND h.hold_queue = p.name
                           ORDER BY h.priority, h.due_at LIMIT 1) w ON true
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
        SELECT cronbox.new_run_id() AS run_id, o.*
        FROM outcome o
        WHERE o.act IN ('run', 'skip', 'supersede', 'fail_dependency', 'fail_unavailable', 'miss')
    ),
    -- = ANY (ARRAY(...)): primary-key probes whatever the CTE row estimates say.
    gone AS (
        DELETE FROM cronbox.job_future f
        WHERE (p_buckets IS NULL OR f.bucket = ANY (p_buckets))
          AND f.future_id = ANY (ARRAY(SELECT fire.future_id FROM fire))
    ),
    -- The writes to rows of other tables reach them by key (= ANY) and look their values up
    -- in one JSON value (holds) or in arrays by binary search (job statistics) built once per
    -- statement, never by a join to a CTE: with a generic plan such a join became a nested
    -- loop whose every probe (job_id = c.job_id AND job_id = ANY (...)) sorted the id array
    -- again, quadratic: ~40 % of a 1,000-run dispatch in perf.
    holds AS MATERIALIZED (
        SELECT array_agg(o.future_id) AS ids,
               jsonb_object_agg(o.future_id::text, jsonb_build_array(
                   CASE o.act WHEN 'hold_paused' THEN 'paused' WHEN 'hold_dependency' THEN 'dependency'
                              WHEN 'hold_queue' THEN 'queue_limit' WHEN 'hold_pool' THEN 'pool' ELSE 'overlap' END,
                   CASE WHEN o.act = 'hold_queue' THEN o.queue WHEN o.act = 'hold_pool' THEN o.pool END,
                   o.timeout_at)) AS of
        FROM outcome o
        WHERE o.act LIKE 'hold\_%'
    ),
    held AS (
        UPDATE cronbox.job_future f SET
            hold = h.of -> f.future_id::text ->> 0,
            hold_queue = h.of -> f.future_id::text ->> 1,
            held_since = coalesce(f.held_since, p_now),
            -- the backstop: re-examined then whatever happens (a dependency at its timeout)
            hold_until = least(p_now + interval '30 seconds', (h.of -> f.future_id::text ->> 2)::timestamptz)
        FROM holds h
        WHERE (p_buckets IS NULL OR f.bucket = ANY (p_buckets)) AND f.future_id = ANY (h.ids)
    ),
    -- on_unavailable = 'retry': the fire is put back, due again after the job's retry delay,
    -- doubling with the time it has waited (capped at retry_max_delay).
    postponed AS (
        UPDATE cronbox.job_future f SET
            due_at = p_now + least(greatest((x.of -> f.future_id::text ->> 0)::interval,
                                            p_now - coalesce(f.held_since, p_now)),
                                   (x.of -> f.future_id::text ->> 1)::interval),
            held_since = coalesce(f.held_since, p_now)
        FROM (SELECT array_agg(o.future_id) AS ids,
                     jsonb_object_agg(o.future_id::text, jsonb_build_array(o.retry_delay, o.retry_max_delay)) AS of
              FROM outcome o WHERE o.act = 'retry_pool') x
        WHERE (p_buckets IS NULL OR f.bucket = ANY (p_buckets)) AND f.future_id = ANY (x.ids)
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
    ),
    new_message AS (
        -- A run: its outbox row carries the run (outbox_id = run_id); no message, the claim
        -- builds it from the row; available at its due time (early dispatch) or now.
        INSERT INTO cronbox.outbox (outbox_id, run_id, queue, kind, message, timeout, created_at, available_at,
                                    job_id, job_name, fire_at, due_at, attempt, origin, retry_of,
                                    priority, payload, state, dispatched_at, needs, bucket)
        SELECT fire.run_id, fire.run_id, fire.queue, 'run', NULL::jsonb, fire.timeout, p_now, greatest(fire.due_at, p_now),
               fire.job_id, fire.name, fire.fire_at, fire.due_at, fire.attempt, fire.origin, fire.retry_of,
               fire.priority, fire.message_payload, 'dispatched',
               greatest(fire.due_at, p_now),  -- early: as of its due time
               fire.needs,  -- the units it holds until it ends
               fire.bucket
        FROM fire
        WHERE fire.act = 'run'
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
    -- Per job, the counts of this call, as arrays in job_id order: a job_stat row finds its
    -- values at the position width_bucket (a binary search) gives its job_id.
    per_job AS MATERIALIZED (
        SELECT fire.job_id, bool_and(fire.folded) AS folded,
               count(*) FILTER (WHERE fire.act = 'miss') AS n_missed,
               count(*) FILTER (WHERE fire.act = 'run') AS n_run,
               count(*) FILTER (WHERE fire.act IN ('fail_dependency', 'fail_unavailable')) AS n_failed,
               max(fire.fire_at) FILTER (WHERE fire.act = 'run') AS last_fire,
               max(fire.run_id) FILTER (WHERE fire.act IN ('run', 'fail_dependency', 'fail_unavailable')) AS last_run,
               (array_agg(CASE fire.act WHEN 'run' THEN 'dispatched' ELSE 'failed' END
                          ORDER BY fire.run_id DESC)
                    FILTER (WHERE fire.act IN ('run', 'fail_dependency', 'fail_unavailable')))[1] AS last_state
        FROM fire GROUP BY fire.job_id
    ),
    counts AS MATERIALIZED (
        SELECT array_agg(c.job_id ORDER BY c.job_id) AS ids,
               array_agg(c.n_run ORDER BY c.job_id) AS n_run,
               array_agg(c.last_fire ORDER BY c.job_id) AS last_fire,
               array_agg(c.last_run ORDER BY c.job_id) AS last_run,
               array_agg(c.last_state ORDER BY c.job_id) AS last_state,
               array_agg(c.n_failed ORDER BY c.job_id) AS n_failed,
               array_agg(c.n_missed ORDER BY c.job_id) AS n_missed
        FROM per_job c
        WHERE (c.n_run > 0 OR c.n_failed > 0 OR c.n_missed > 0) AND NOT c.folded
    ),
    -- The jobs whose statistics no policy reads: one row for all of them, folded into job_stat
    -- by the poller within a second (cronbox.fold_job_stats).
    stat_change AS (
        INSERT INTO cronbox.job_stat_change (job_ids, active, last_fire, last_run, last_state,
                                             ok, failures, crashes, missed, success_at)
        SELECT array_agg(c.job_id), array_agg(c.n_run::integer), array_agg(c.last_fire),
               array_agg(c.last_run), array_agg(c.last_state), array_agg(0),
               array_agg(c.n_failed::integer), array_agg(0), array_agg(c.n_missed), p_now
        FROM per_job c
        WHERE (c.n_run > 0 OR c.n_failed > 0 OR c.n_missed > 0) AND c.folded
        HAVING count(*) > 0
    ),
    -- The job's statistics row (narrow, HOT: cronbox.job_stat), not its definition row.
    job_counts AS (
        UPDATE cronbox.job_stat s SET
            active_runs = s.active_runs + c.n_run[width_bucket(s.job_id, c.ids)],
            last_fire_at = CASE WHEN c.n_run[width_bucket(s.job_id, c.ids)] > 0
                                THEN greatest(s.last_fire_at, c.last_fire[width_bucket(s.job_id, c.ids)])
                                ELSE s.last_fire_at END,
            last_run_id = coalesce(c.last_run[width_bucket(s.job_id, c.ids)], s.last_run_id),
            last_run_state = coalesce(c.last_state[width_bucket(s.job_id, c.ids)], s.last_run_state),
            consecutive_failures = s.consecutive_failures + c.n_failed[width_bucket(s.job_id, c.ids)],
            missed_count = s.missed_count + c.n_missed[width_bucket(s.job_id, c.ids)]
        FROM counts c
        WHERE (p_buckets IS NULL OR s.bucket = ANY (p_buckets)) AND s.job_id = ANY (c.ids)
    ),
    queue_counts AS (
        UPDATE cronbox.queue_limit q SET running = q.running + c.n, updated_at = p_now
        FROM (SELECT fire.queue, count(*) AS n FROM fire WHERE fire.act = 'run' GROUP BY fire.queue) c
        WHERE q.queue = c.queue
    ),
    -- The units the new runs hold (only runs of jobs with needs; the rows locked in pool_free).
    pool_counts AS (
        UPDATE cronbox.pool p SET in_use = p.in_use + c.n, updated_at = p_now
        FROM (SELECT e.key AS pool, sum(e.value::text::bigint) AS n
              FROM fire CROSS JOIN LATERAL jsonb_each(fire.needs) e
              WHERE fire.act = 'run' AND fire.needs IS NOT NULL
              GROUP BY e.key) c
        WHERE p.name = c.pool
    )
    SELECT count(*) FILTER (WHERE o.act = 'run'),
           count(*) FILTER (WHERE o.act IN ('skip', 'supersede', 'miss')),
           count(*) FILTER (WHERE o.act IN ('fail_dependency', 'fail_unavailable')),
           count(*) FILTER (WHERE o.act LIKE 'hold\_%' OR o.act = 'retry_pool'),
           (SELECT array_agg(DISTINCT fire.job_id) FROM fire
            WHERE fire.act = 'run' AND fire.overlap = 'cancel_other' AND fire.active_runs > 0),
           (SELECT array_agg(fire.run_id) FROM fire
            WHERE fire.act = 'run' AND fire.overlap = 'cancel_other' AND fire.active_runs > 0),
           (SELECT array_agg(n.outbox_id) FROM new_note n)
      INTO v_dispatched, v_skipped, v_failed, v_held, v_cancel_jobs, v_new_runs, v_notes
    FROM outcome o;
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

COMMENT ON FUNCTION cronbox.dispatch_locked(bigint[], bigint[], interval, timestamp with time zone, integer[]) IS
'Internal: the write shared by dispatch and early dispatch. For futures and jobs the caller locked, decides (paused, dependency gate, overlap, catch-up with p_grace, queue limit) and writes each run''s outbox row (the run in flight, dispatched as of the later of the due time and p_now), skipped/missed/failed runs, holds, job statistics and queue slots in one statement. Returns the counts.';

ALTER FUNCTION cronbox.dispatch_locked(bigint[], bigint[], interval, timestamp with time zone, integer[]) OWNER TO cronbox_owner;
REVOKE ALL ON FUNCTION cronbox.dispatch_locked(bigint[], bigint[], interval, timestamp with time zone, integer[]) FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
