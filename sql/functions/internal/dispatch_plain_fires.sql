-- cronbox.dispatch_plain_fires(p_fires, p_now, p_buckets, p_claim_at_due): the write of a
-- plain batch (cronbox.dispatch_plain's, which reads and decides it; early dispatch decides its
-- own batch under the locks in the read that checks it, cronbox.dispatch_ahead_at): each fire
-- of p_fires as decided (wish: run or skip; folded: its statistics left to the poller's fold).
-- The caller holds the futures' (FOR UPDATE) and the jobs' locks. Writes: each run's outbox
-- row, each skipped fire's history row, the statistics (to the poller's fold, or in job_stat
-- for jobs a policy reads them for), the futures deleted (a job whose last scheduled fire this
-- was shows as finished in the change log from its state: cronbox.job_finishes, nothing written
-- for it); then NOTIFY cronbox_outbox.
-- Statements as dispatch_locked's on Citus: the bucket set's rows (job_future, job_stat) or the
-- coordinator's own tables and the values read before, never both.
-- p_claim_at_due: as dispatch_locked's (early 'skip' runs flagged as they are inserted, and
-- marked on their job's statistics row by the statistics' own update).
CREATE OR REPLACE FUNCTION cronbox.dispatch_plain_fires(
    p_fires cronbox.dispatch_fire[],
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
    v_fires cronbox.dispatch_fire[] := p_fires;
    -- names of the batch's jobs whose statistics may be folded off the hot path
    v_candidates text[] := ARRAY(SELECT f.name FROM unnest(p_fires) f WHERE f.folded);
    v_after text[] := '{}';   -- those of them an after-job lists (their statistics are read: not folded)
    v_dispatched integer;
    v_skipped integer;
    v_gone bigint[];          -- the futures decided: deleted
    v_stat_ids bigint[];
    v_stats jsonb;            -- job -> [runs, last fire in seconds from p_now, last run, its state, failures, missed]
    -- Where the hot tables are distributed (Citus layer, sql/citus/distributed_plans.sql sets it
    -- on this function), step 2 in the form that sends nothing to another worker node
    v_distributed boolean := current_setting('cronbox.distributed', true) IS NOT DISTINCT FROM 'on';
    v_chg_ids bigint[];       -- there: the folded jobs' statistics changes, per job: its id,
    v_chg_n integer[];        -- its runs of this call,
    v_chg_fire timestamptz[]; -- its last fire,
    v_chg_run bigint[];       -- its last run
    v_chg_bucket integer[];   -- and its bucket
    v_n integer;
BEGIN
    -- 1. Statistics no policy reads are left to the poller's fold, unless an after-job lists
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
    -- 2. The writes outside the bucket's tables: runs' outbox rows, skipped fires' history rows,
    --    the statistics to fold; and what the bucket's rows need (step 3).
    IF v_distributed THEN
        -- On distributed tables each insert reads the fires from the array, never from another
        -- step's result: Citus sends a result that an INSERT of a data-modifying step reads to
        -- every worker node, so one node down would stop every bucket's dispatch (docs/citus.md,
        -- "A worker node stopped"). Each run id is drawn by the insert that writes it, in fire
        -- order (the array's); the statistics read them back from the outbox rows' RETURNING,
        -- which only this statement's SELECT reads; the change rows of the folded jobs, from
        -- arrays, in a statement of their own. Plain PostgreSQL keeps the one statement below
        -- (the arrays cost its dispatch ~13 % CPU: bench/results/2026-11-30-citus10.md).
        WITH
        -- a skipped fire is history at once, final (docs/architecture.md, "One row in flight")
        new_run AS (
            INSERT INTO cronbox.run (run_id, job_id, job_name, queue, fire_at, due_at, state, attempt,
                                     origin, retry_of, payload, priority, dispatched_at,
                                     finished_at, error, missed_fires, missed_last_at, needs, bucket, trouble)
            SELECT CASE WHEN v_index IS NULL THEN cronbox.new_run_id() ELSE cronbox.new_bucket_run_id(v_index) END,
                   f.job_id, f.name, f.queue, f.fire_at, f.due_at, 'skipped',
                   f.attempt, f.origin, f.retry_of, f.message_payload, f.priority, NULL, p_now,
                   'overlap: skipped, an earlier run of this job is unfinished', NULL, NULL, NULL, f.bucket,
                   cronbox.run_trouble('skipped')
            FROM unnest(p_fires) f
            WHERE f.wish = 'skip'
            RETURNING 1  -- not a COPY on Citus (refused under row security): docs/citus.md
        ),
        -- a run: its outbox row carries the run until its final report (as dispatch_locked writes it)
        new_message AS (
            INSERT INTO cronbox.outbox (outbox_id, run_id, queue, kind, message, timeout, created_at, available_at,
                                        job_id, job_name, fire_at, due_at, attempt, origin, retry_of,
                                        priority, payload, state, dispatched_at, needs, bucket, claim_at_due)
            SELECT f.run_id, f.run_id, f.queue, 'run', NULL::jsonb, f.timeout, p_now, greatest(f.due_at, p_now),
                   f.job_id, f.name, f.fire_at, f.due_at, f.attempt, f.origin, f.retry_of,
                   f.priority, f.message_payload, 'dispatched',
                   greatest(f.due_at, p_now),  -- early: as of its due time
                   NULL, f.bucket,
                   p_claim_at_due IS NOT NULL AND f.due_at > p_now AND f.job_id = ANY (p_claim_at_due)
            -- OFFSET 0: the id drawn once per fire (its two columns)
            FROM (SELECT CASE WHEN v_index IS NULL THEN cronbox.new_run_id() ELSE cronbox.new_bucket_run_id(v_index) END AS run_id,
                         u.* FROM unnest(p_fires) u WHERE u.wish = 'run' OFFSET 0) f
            RETURNING outbox_id, job_id, fire_at, due_at, bucket
        ),
        -- per job of the runs, whether its statistics are folded, and derived from its runs: arrays
        -- in job_id order, looked up by a binary search (width_bucket; SQL conventions: no join)
        flags AS MATERIALIZED (
            SELECT array_agg(x.job_id ORDER BY x.job_id) AS ids, array_agg(x.folded ORDER BY x.job_id) AS folded,
                   array_agg(x.derived ORDER BY x.job_id) AS derived
            FROM (SELECT f.job_id, bool_and(f.folded AND NOT f.name = ANY (v_after)) AS folded,
                         bool_and(coalesce(f.derived, false)) AS derived
                  FROM unnest(p_fires) f WHERE f.wish = 'run' GROUP BY f.job_id) x
        ),
        -- per job, its runs of this call (a skipped fire changes no statistic)
        per_job AS MATERIALIZED (
            SELECT m.job_id, min(m.bucket) AS bucket, count(*)::integer AS n_run,
                   max(m.fire_at) AS last_fire, max(m.outbox_id) AS last_run,
                   max(m.due_at) FILTER (WHERE m.job_id = ANY (p_claim_at_due)) AS early_due,
                   bool_and(x.folded[width_bucket(m.job_id, x.ids)]) AS folded,
                   bool_and(x.derived[width_bucket(m.job_id, x.ids)]) AS derived
            FROM new_message m CROSS JOIN flags x
            GROUP BY m.job_id
        )
        SELECT (SELECT sum(c.n_run) FROM per_job c)::integer, (SELECT count(*) FROM new_run)::integer,
               ARRAY(SELECT f.future_id FROM unnest(p_fires) f),
               -- the jobs whose statistics no policy reads: their change rows, written in step 3
               c.chg_ids, c.chg_n, c.chg_fire, c.chg_run, c.chg_bucket,
               -- the others', looked up by key in the update of step 3 (dispatch_locked's form: SQL conventions 1)
               c.ids, c.of
          INTO v_dispatched, v_skipped, v_gone, v_chg_ids, v_chg_n, v_chg_fire, v_chg_run, v_chg_bucket,
               v_stat_ids, v_stats
        FROM (SELECT array_agg(c.job_id) FILTER (WHERE c.folded AND NOT c.derived) AS chg_ids,  -- a derived job's: read from its runs
                     array_agg(c.n_run) FILTER (WHERE c.folded AND NOT c.derived) AS chg_n,
                     array_agg(c.last_fire) FILTER (WHERE c.folded AND NOT c.derived) AS chg_fire,
                     array_agg(c.last_run) FILTER (WHERE c.folded AND NOT c.derived) AS chg_run,
                     array_agg(c.bucket) FILTER (WHERE c.folded AND NOT c.derived) AS chg_bucket,
                     array_agg(c.job_id) FILTER (WHERE NOT c.folded) AS ids,
                     jsonb_object_agg(c.job_id::text, jsonb_build_array(
                         c.n_run, extract(epoch FROM c.last_fire - p_now), c.last_run, 'dispatched',
                         extract(epoch FROM c.early_due - p_now))) FILTER (WHERE NOT c.folded) AS of
              FROM per_job c) c;

        -- the jobs whose statistics no policy reads: one row for all of them per bucket, folded by
        -- the poller; from the arrays, as the inserts above
        IF v_chg_ids IS NOT NULL THEN
            WITH stat_change AS (
                INSERT INTO cronbox.job_stat_change (job_ids, active, last_fire, last_run, last_state,
                                                     ok, failures, crashes, missed, success_at, bucket)
                SELECT array_agg(c.job_id), array_agg(c.n_run), array_agg(c.last_fire), array_agg(c.last_run),
                       array_agg('dispatched'::text), array_agg(0), array_agg(0), array_agg(0), array_agg(0::bigint), p_now,
                       c.bucket
                FROM unnest(v_chg_ids, v_chg_n, v_chg_fire, v_chg_run, v_chg_bucket) AS c(job_id, n_run, last_fire, last_run, bucket)
                GROUP BY c.bucket  -- a row per bucket of the jobs (one on plain PostgreSQL)
                RETURNING 1  -- not a COPY on Citus (refused under row security): docs/citus.md
            )
            SELECT count(*) INTO v_n FROM stat_change;
        END IF;
    ELSE
        WITH
        fire AS MATERIALIZED (
            SELECT CASE WHEN v_index IS NULL THEN cronbox.new_run_id() ELSE cronbox.new_bucket_run_id(v_index) END AS run_id,
                   f.future_id, f.job_id, f.name, f.queue, f.fire_at, f.due_at,
                   f.priority, f.attempt, f.origin, f.retry_of, f.message_payload, f.timeout, f.bucket, f.wish,
                   f.folded AND NOT f.name = ANY (v_after) AS folded, coalesce(f.derived, false) AS derived
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
            SELECT fire.job_id, min(fire.bucket) AS bucket, bool_and(fire.folded) AS folded,
                   bool_and(fire.derived) AS derived, count(*)::integer AS n_run,
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
            WHERE c.folded AND NOT c.derived  -- a derived job's: read from its runs, written nowhere
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
    END IF;

    -- 3. The bucket's rows: the futures decided go, and the statistics policies read are
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

    IF v_dispatched > 0 THEN
        PERFORM pg_notify('cronbox_outbox', '');
    END IF;
    RETURN QUERY SELECT v_dispatched, v_skipped, 0, 0;
END
$$;

COMMENT ON FUNCTION cronbox.dispatch_plain_fires(cronbox.dispatch_fire[], timestamp with time zone, integer[], bigint[]) IS
'Internal: the write of a plain batch decided by its caller (cronbox.dispatch_plain, cronbox.dispatch_ahead_at) under the futures'' and jobs'' locks: runs'' outbox rows, skipped fires'' history rows, the statistics, the futures deleted. Returns the counts.';

ALTER FUNCTION cronbox.dispatch_plain_fires(cronbox.dispatch_fire[], timestamp with time zone, integer[], bigint[]) OWNER TO cronbox_owner;
REVOKE ALL ON FUNCTION cronbox.dispatch_plain_fires(cronbox.dispatch_fire[], timestamp with time zone, integer[], bigint[]) FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
