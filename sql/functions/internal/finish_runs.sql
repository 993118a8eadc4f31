-- cronbox.finish_runs(run_ids, outcome, results, errors, retryable, p_now, p_bucket): the one path by
-- which runs reach a final state (complete_run(s), fail_run(s), the reaper, cancel). Set-based:
-- a few statements whatever the batch size. Locks, always in this order (no deadlock with
-- dispatch): the jobs' locks (job_stat rows, cronbox.lock_job_id; on success the after-jobs listing
-- them too) by job_id, the runs, the queue_limit rows by queue, the pool rows by name. Then: job bookkeeping
-- (cronbox.job_stat, or one cronbox.job_stat_change row for the jobs whose statistics are
-- folded off the hot path), retry futures (a retry is a new run later), on_error, notifications,
-- releases of held futures, after-jobs whose upstreams all succeeded. A report for a run
-- already final is kept in cronbox.run_late_report and changes nothing. One report of one run
-- that needs none of that but its change row (a success of a job no policy reads) takes two
-- statements (step 0), and so does a batch of successes that need nothing else (step 0b: the
-- relay's ack with its worker's answers, complete_runs).
CREATE OR REPLACE FUNCTION cronbox.finish_runs(
    p_run_ids   bigint[],
    p_outcome   text,                    -- succeeded | failed | lost | cancelled
    p_results   jsonb[] DEFAULT NULL,    -- per run, outcome succeeded
    p_errors    text[] DEFAULT NULL,     -- per run, other outcomes
    p_retryable boolean DEFAULT true,
    p_now       timestamptz DEFAULT now(),
    p_bucket    integer DEFAULT NULL      -- the runs' bucket (NULL: see below)
) RETURNS TABLE (run_id bigint, state text, verdict text)
LANGUAGE plpgsql
SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
-- Row estimates through CTEs are rough; JIT compiling this short statement costs more than it runs.
SET jit = off
-- One plan per session: its statements prune run partitions at run time (BETWEEN on the
-- batch's bounds), so re-planning each call for plan-time pruning only costs (a custom plan
-- per statement made a one-run complete_run ~3 ms; generic: ~0.8 ms, batches no slower).
SET plan_cache_mode = force_generic_plan
SET enable_seqscan = off  -- a plan kept from an empty table: docs/architecture.md, SQL conventions
AS $$
DECLARE
    v_job bigint;             -- the one run's job (step 0)
    v_derived boolean;        -- its statistics derived from its runs (job_stat.stats_from_runs): no change row
    v_derived_jobs bigint[];  -- step 0b: those of its jobs (sorted; NULL: none)
    v_jobs bigint[];
    v_fin_jobs bigint[];
    v_fixed_delay bigint[];
    v_after bigint[] := '{}';
    v_after_names text[];     -- names of these jobs listed by after-jobs: upstreams
    v_fin cronbox.finished_run[];
    v_result_of jsonb;
    v_error_of jsonb;
    v_late bigint[];
    v_late_buckets integer[];  -- the late runs' buckets (their history rows')
    v_missing bigint[];       -- ids not in flight: read from history (late, never ran, unknown)
    v_ids bigint[];
    v_states text[];
    v_verdicts text[];
    v_woken integer := 0;
    v_n integer;
    v_paused_ids bigint[];
    v_paused_names text[];
    v_paused_reasons text[];
    v_paused_buckets integer[];
    v_notifies boolean;       -- step 3b: some of the failed runs' jobs have recipients of their own
    v_notes bigint[];          -- the notifications written (step 3b)
    v_needs jsonb[];          -- the pool units the runs that ended here took at dispatch
    v_release bigint[];       -- held futures that may go now
    v_failures boolean;       -- some of the runs that ended here failed or were lost
    v_all_folded boolean;     -- every job of these runs has its statistics folded (cronbox.job_stat_folded)
    v_limited boolean;        -- some of these runs' queues have a limit (cronbox.queue_limit)
    v_asked bigint[] := p_run_ids;  -- the ids asked about (step 0b may leave steps 1-8 fewer)
    v_queues text[];          -- step 0b: the queues of the runs in flight
    v_locked_all boolean;     -- step 0b found every id in flight and locked all their jobs: no step 1
    v_fast bigint[];          -- step 0b: the runs it ended
    v_rows cronbox.outbox[];  -- step 2b, on distributed tables: the outbox rows deleted
    v_after_buckets integer[];  -- the buckets of the after-jobs (v_after), parallel to it
    v_up_all text[];          -- step 8: the upstreams the after-jobs list
    v_up_in text[];           -- those of one bucket
    v_up_names text[];        -- those that are jobs
    v_up_success timestamptz[];  -- and their last successes, parallel
    v_b integer;
    v_decided jsonb;          -- step 3: the failures' decisions, for step 3b
    v_folded_counts jsonb;    -- step 3: the per-job counts of the jobs whose statistics are folded
    -- Where the hot tables are distributed (Citus layer: sql/citus/distributed_plans.sql sets it
    -- on this function), no insert reads another step's result: Citus sends such a result to
    -- every worker node, so one node stopped would stop every bucket's reports (docs/citus.md,
    -- "A worker node stopped"). There steps 0 and 0b (a delete and the inserts that read it, in
    -- one statement) are not taken and step 2b inserts from the rows it deleted, gathered into
    -- v_rows; plain PostgreSQL keeps its one-statement forms.
    v_distributed boolean := current_setting('cronbox.distributed', true) IS NOT DISTINCT FROM 'on';
    v_gated integer[];        -- step 7: the buckets of the jobs gated on these
    v_gated_unknown boolean;  -- and whether a dependency does not say its bucket
BEGIN
    -- By bucket (docs/citus.md, "The finishing calls, bucket by bucket"): with p_bucket, every
    -- statement reads and writes that bucket's rows (an id of another bucket is not found), but
    -- the after-jobs of other buckets a success fires (step 1's locks and step 8: a statement
    -- per bucket) and the shared tables (limits, pools, dependencies). Without it, where Citus
    -- distributes the outbox by bucket, the ids go bucket by bucket
    -- (cronbox.finish_runs_by_bucket: the bucket each id carries); anywhere else (plain
    -- PostgreSQL, one bucket) no statement filters on the bucket.
    IF p_bucket IS NULL THEN
        IF to_regclass('cronbox.bucket') IS NOT NULL
           AND array_length(cronbox.bucket_walks('cronbox.outbox'), 1) > 1 THEN
            RETURN QUERY SELECT * FROM cronbox.finish_runs_by_bucket(p_run_ids, p_outcome, p_results, p_errors,
                                                                     p_retryable, p_now);
            RETURN;
        END IF;
    ELSIF p_bucket < 0 THEN
        RAISE EXCEPTION 'p_bucket: must be NULL or a bucket (0 or more), got %', p_bucket
            USING ERRCODE = 'invalid_parameter_value';
    END IF;

    IF p_outcome IS NULL OR p_outcome NOT IN ('succeeded', 'failed', 'lost', 'cancelled') THEN
        RAISE EXCEPTION 'outcome: must be succeeded, failed, lost or cancelled, got %', p_outcome
            USING ERRCODE = 'invalid_parameter_value';
    END IF;

    -- Error texts are kept, never refused for their size: cut to 4000 characters with a marker.
    IF p_errors IS NOT NULL THEN
        p_errors := ARRAY(SELECT cronbox.clip_text(e.t, 4000) FROM unnest(p_errors) WITH ORDINALITY AS e(t, i) ORDER BY e.i);
    END IF;

    -- 0. One report of one run, the common case (a worker reporting run by run): two
    --    statements, when ending the run asks for nothing but its history row and its job's
    --    change row: a success, or a failure of a run whose cancel was requested (cancelled, never
    --    retried), holding no pool units, of a job whose statistics are folded
    --    (cronbox.job_stat_folded: no overlap policy, fixed delay, dependency or after-job reads
    --    them, so no gated fire or after-job waits for it), in a queue without a limit, with no
    --    fire of the job held for overlap (a backfill's own policy). The first statement finds
    --    the run in flight by the outbox's key and takes its job's lock (the same lock as step 1;
    --    a job named by an after-job is left to step 1, which locks the after-jobs with it in
    --    job_id order, as before: the after-jobs read without a lock, as there); the second, with
    --    a snapshot taken under the lock, checks the job's policies, deletes the outbox row and
    --    inserts its history row and the change row. No statement names a history partition
    --    but the one the insert routes to. Anything else (not in flight: a late report, a fire
    --    that never ran, an unknown id; a retry, on_error, a notification, a release) is left
    --    to steps 1-8, which start again from the outbox row (the job's lock, if taken here, is
    --    simply held already).
    IF cardinality(p_run_ids) = 1 AND p_outcome IN ('succeeded', 'failed') AND NOT v_distributed THEN
        SELECT s.job_id, s.stats_from_runs INTO v_job, v_derived
        FROM cronbox.job_stat s
        WHERE (p_bucket IS NULL OR s.bucket = p_bucket)
          AND s.job_id = (SELECT o.job_id FROM cronbox.outbox o
                          WHERE (p_bucket IS NULL OR o.bucket = p_bucket)
                            AND o.outbox_id = p_run_ids[1] AND o.kind = 'run'
                            AND (p_outcome = 'succeeded' OR o.cancel_requested) AND o.needs IS NULL
                            -- no after-job names it (a probe of the edges' key)
                            AND NOT EXISTS (SELECT 1 FROM cronbox.job_after_edge e
                                            WHERE e.upstream = o.job_name))
        FOR NO KEY UPDATE;
        IF v_job IS NOT NULL THEN
            WITH gone AS (
                DELETE FROM cronbox.outbox o
                WHERE (p_bucket IS NULL OR o.bucket = p_bucket)
                  AND o.outbox_id = p_run_ids[1] AND o.kind = 'run' AND o.job_id = v_job
                  AND NOT EXISTS (SELECT 1 FROM cronbox.queue_limit q WHERE q.queue = o.queue)
                  AND NOT EXISTS (SELECT 1 FROM cronbox.job_future h
                                  WHERE (p_bucket IS NULL OR h.bucket = p_bucket)
                                    AND h.job_id = v_job AND h.hold = 'overlap')
                  -- folded (cronbox.job_stat_folded's test written out: Citus plans no SQL function
                  -- that reads a table inside a data-modifying statement)
                  AND EXISTS (SELECT 1 FROM cronbox.job j
                              WHERE (p_bucket IS NULL OR j.bucket = p_bucket) AND j.job_id = v_job
                                AND j.overlap = 'allow' AND j.every_mode <> 'fixed_delay')
                  AND ((SELECT NOT EXISTS (SELECT 1 FROM cronbox.job_dependency))
                       OR (NOT EXISTS (SELECT 1 FROM cronbox.job_dependency d WHERE d.job_id = v_job)
                           AND NOT EXISTS (SELECT 1 FROM cronbox.job_dependency d WHERE d.upstream_id = v_job)))
                RETURNING o.outbox_id, o.job_id, o.job_name, o.queue, o.fire_at, o.due_at, o.attempt, o.origin,
                          o.retry_of, o.payload, o.priority, o.dispatched_at, o.delivered_at, o.started_at,
                          o.worker, o.cancel_requested, o.bucket,
                          CASE WHEN p_outcome = 'succeeded' THEN 'succeeded' ELSE 'cancelled' END AS state
            ),
            finished AS (
                INSERT INTO cronbox.run (run_id, job_id, job_name, queue, fire_at, due_at, state, attempt,
                                         origin, retry_of, payload, priority, dispatched_at, delivered_at,
                                         started_at, finished_at, lease_until, worker, cancel_requested,
                                         result, error, needs, bucket, trouble)
                SELECT g.outbox_id, g.job_id, g.job_name, g.queue, g.fire_at, g.due_at, g.state, g.attempt,
                       g.origin, g.retry_of, g.payload, g.priority, g.dispatched_at,
                       coalesce(g.delivered_at, g.started_at, p_now), g.started_at, p_now, NULL, g.worker,
                       g.cancel_requested, p_results[1],
                       CASE WHEN g.state = 'cancelled' THEN coalesce(p_errors[1], 'cancelled') END,
                       NULL, g.bucket, cronbox.run_trouble(g.state)
                FROM gone g
                RETURNING 1  -- not a COPY on Citus (refused under row security): docs/citus.md
            ),
            change AS (
                INSERT INTO cronbox.job_stat_change (job_ids, active, last_fire, last_run, last_state,
                                                     ok, failures, crashes, missed, success_at, bucket)
                SELECT ARRAY[g.job_id], '{-1}', '{NULL}', ARRAY[g.outbox_id], ARRAY[g.state],
                       CASE WHEN g.state = 'succeeded' THEN '{1}'::integer[] ELSE '{0}' END,
                       '{0}', '{0}', '{0}', p_now, g.bucket
                FROM gone g
                WHERE NOT v_derived  -- a one-off's statistics are read from its runs: nothing to write
                RETURNING 1  -- not a COPY on Citus (refused under row security): docs/citus.md
            )
            SELECT g.state INTO state FROM gone g;
            IF state IS NOT NULL THEN
                run_id := p_run_ids[1];
                verdict := 'finished';
                RETURN NEXT;
                RETURN;
            END IF;
        END IF;
    END IF;

    -- 2. The reports (result, error), looked up by run id (the first report of an id wins).
    IF cardinality(p_run_ids) = 1 THEN
        v_result_of := CASE WHEN p_results[1] IS NOT NULL THEN jsonb_build_object(p_run_ids[1]::text, p_results[1]) END;
        v_error_of := CASE WHEN p_errors[1] IS NOT NULL THEN jsonb_build_object(p_run_ids[1]::text, p_errors[1]) END;
    ELSIF p_results IS NOT NULL OR p_errors IS NOT NULL THEN
        SELECT jsonb_object_agg(x.id::text, x.result) FILTER (WHERE x.result IS NOT NULL),
               jsonb_object_agg(x.id::text, x.error) FILTER (WHERE x.error IS NOT NULL)
          INTO v_result_of, v_error_of
        -- the three arrays side by side (a subscript into an array of jsonb or text walks every
        -- element before it: quadratic in the batch)
        FROM (SELECT DISTINCT ON (u.id) u.id, u.result, u.error
              FROM unnest(p_run_ids, p_results, p_errors) WITH ORDINALITY AS u(id, result, error, ord)
              WHERE u.id IS NOT NULL
              ORDER BY u.id, u.ord) x;
    END IF;
    -- 0b. A batch of successes that asks for nothing but history rows and one change row (the
    --    relay's ack with its worker's answers, complete_runs): two statements, as step 0 for one
    --    run, when every id is a run in flight (no duplicate, none unknown or final), holding no
    --    pool units, of jobs whose statistics are folded (cronbox.job_stat_folded), in queues
    --    without a limit, with no fire of these jobs held for overlap, named by no after-job
    --    (cronbox.job_after_edge, one probe of its key per name, read without a lock as in
    --    steps 0 and 1; a job an after-job names goes steps 1-8, which lock and fire it). The
    --    first statement finds the runs by the outbox's key, with their jobs' names as the runs
    --    carry them, and takes their jobs' locks in job_id order (no after-job to lock with
    --    them); the second, with a snapshot taken under the locks, checks the jobs' policies
    --    again, deletes the outbox rows and inserts their history rows and the change row, or
    --    does nothing when a check fails. Anything else goes to steps 1-8 (the locks taken here are held already). A run
    --    that another finisher ended between the read and the lock is not deleted here: the ids
    --    this step did not end go on to steps 1-8, which tell a late report from an unknown id.
    --    When a check fails (the common case for jobs a policy reads: overlap 'skip', the
    --    default), what the first statement read and locked is what step 1 would read and lock
    --    (every run in flight, every job locked, no after-job naming them): step 1 is skipped,
    --    and the job rows are read once, by step 3 (the job check below stops at the first job
    --    a policy reads).
    IF p_outcome = 'succeeded' AND cardinality(p_run_ids) > 1 AND NOT v_distributed THEN
        WITH runs AS MATERIALIZED (
            SELECT o.job_id, o.job_name, o.queue FROM cronbox.outbox o
            WHERE (p_bucket IS NULL OR o.bucket = p_bucket)
              AND o.outbox_id = ANY (p_run_ids) AND o.kind = 'run' AND o.needs IS NULL
        ),
        fit AS MATERIALIZED (
            SELECT CASE WHEN count(*) = cardinality(p_run_ids) THEN array_agg(DISTINCT r.job_id) END AS jobs,
                   array_agg(DISTINCT r.queue) AS queues, array_agg(DISTINCT r.job_name) AS names
            FROM runs r
        ),
        locked AS MATERIALIZED (
            SELECT s.job_id, s.stats_from_runs FROM cronbox.job_stat s
            WHERE (p_bucket IS NULL OR s.bucket = p_bucket)
              AND s.job_id = ANY (ARRAY(SELECT u.id FROM fit f CROSS JOIN LATERAL unnest(f.jobs) AS u(id)))
              -- no after-job names these jobs (none at all: one probe; else a probe of the
              -- edges' key per name): those naming them are left to steps 1-8
              AND (NOT EXISTS (SELECT 1 FROM cronbox.job_after_edge)
                   OR NOT EXISTS (SELECT 1 FROM cronbox.job_after_edge e
                                  WHERE e.upstream = ANY ((SELECT f.names FROM fit f)::text[])))
            ORDER BY s.job_id
            FOR NO KEY UPDATE OF s
        )
        SELECT ARRAY(SELECT l.job_id FROM locked l ORDER BY l.job_id), f.queues,
               cardinality(f.jobs) = (SELECT count(*) FROM locked),
               -- the derived ones, sorted (NULL: none, as width_bucket wants no empty array)
               (SELECT array_agg(l.job_id ORDER BY l.job_id) FROM locked l WHERE l.stats_from_runs)
          INTO v_jobs, v_queues, v_locked_all, v_derived_jobs
        FROM fit f;
        IF cardinality(v_jobs) > 0 THEN
            WITH fits AS MATERIALIZED (
                -- folded (cronbox.job_stat_folded's test written out, as in step 0), first: a
                -- batch of jobs a policy reads stops at its first job row
                SELECT NOT EXISTS (SELECT 1 FROM cronbox.job j
                                   WHERE (p_bucket IS NULL OR j.bucket = p_bucket)
                                     AND j.job_id = ANY (v_jobs)
                                     AND NOT (j.overlap = 'allow' AND j.every_mode <> 'fixed_delay'))
                       AND NOT EXISTS (SELECT 1 FROM cronbox.queue_limit q WHERE q.queue = ANY (v_queues))
                       AND NOT EXISTS (SELECT 1 FROM cronbox.job_future h
                                       WHERE (p_bucket IS NULL OR h.bucket = p_bucket)
                                         AND h.job_id = ANY (v_jobs) AND h.hold = 'overlap')
                       AND ((SELECT NOT EXISTS (SELECT 1 FROM cronbox.job_dependency))
                            OR NOT EXISTS (SELECT 1 FROM cronbox.job_dependency d
                                           WHERE d.job_id = ANY (v_jobs) OR d.upstream_id = ANY (v_jobs))) AS ok
            ),
            gone AS (
                DELETE FROM cronbox.outbox o
                WHERE (p_bucket IS NULL OR o.bucket = p_bucket)
                  AND o.outbox_id = ANY (p_run_ids) AND o.kind = 'run' AND o.needs IS NULL
                  -- a job locked above, by a binary search of v_jobs (in job_id order): as a
                  -- filter, = ANY walked the array for every row (half a batch's jobs per run)
                  AND v_jobs[width_bucket(o.job_id, v_jobs)] = o.job_id
                  AND (SELECT x.ok FROM fits x)
                RETURNING o.outbox_id, o.job_id, o.job_name, o.queue, o.fire_at, o.due_at, o.attempt, o.origin,
                          o.retry_of, o.payload, o.priority, o.dispatched_at, o.delivered_at, o.started_at,
                          o.worker, o.cancel_requested, o.bucket
            ),
            finished AS (
                INSERT INTO cronbox.run (run_id, job_id, job_name, queue, fire_at, due_at, state, attempt,
                                         origin, retry_of, payload, priority, dispatched_at, delivered_at,
                                         started_at, finished_at, lease_until, worker, cancel_requested,
                                         result, error, needs, bucket, trouble)
                SELECT g.outbox_id, g.job_id, g.job_name, g.queue, g.fire_at, g.due_at, 'succeeded', g.attempt,
                       g.origin, g.retry_of, g.payload, g.priority, g.dispatched_at,
                       coalesce(g.delivered_at, g.started_at, p_now), g.started_at, p_now, NULL, g.worker,
                       g.cancel_requested, v_result_of -> g.outbox_id::text, v_error_of ->> g.outbox_id::text,
                       NULL, g.bucket, cronbox.run_trouble('succeeded')
                FROM gone g
                RETURNING 1  -- not a COPY on Citus (refused under row security): docs/citus.md
            ),
            change AS (
                INSERT INTO cronbox.job_stat_change (job_ids, active, last_fire, last_run, last_state,
                                                     ok, failures, crashes, missed, success_at, bucket)
                SELECT array_agg(c.job_id ORDER BY c.job_id), array_agg((-c.n)::integer ORDER BY c.job_id),
                       array_agg(NULL::timestamptz), array_agg(c.last_run ORDER BY c.job_id),
                       array_agg('succeeded'::text), array_agg(c.n::integer ORDER BY c.job_id),
                       array_agg(0), array_agg(0), array_agg(0::bigint), p_now, c.bucket
                FROM (SELECT g.job_id, g.bucket, count(*) AS n, max(g.outbox_id) AS last_run
                      FROM gone g
                      -- not the derived jobs' (a binary search of v_derived_jobs): read from their runs
                      WHERE v_derived_jobs IS NULL OR v_derived_jobs[width_bucket(g.job_id, v_derived_jobs)] IS DISTINCT FROM g.job_id
                      GROUP BY g.job_id, g.bucket) c
                GROUP BY c.bucket  -- a row per bucket of the jobs (one on plain PostgreSQL)
                RETURNING 1  -- not a COPY on Citus (refused under row security): docs/citus.md
            )
            SELECT array_agg(g.outbox_id) INTO v_fast FROM gone g;
            IF cardinality(v_fast) = cardinality(p_run_ids) THEN
                RETURN QUERY SELECT u.id, 'succeeded'::text, 'finished'::text FROM unnest(p_run_ids) AS u(id);
                RETURN;
            ELSIF v_fast IS NOT NULL THEN  -- rare: some of the runs ended elsewhere before the locks
                p_run_ids := ARRAY(SELECT u.id FROM unnest(p_run_ids) AS u(id) WHERE NOT u.id = ANY (v_fast));
            END IF;
        END IF;
        IF coalesce(v_locked_all, false) AND cardinality(v_jobs) > 0 THEN
            -- every id was in flight and every job of them is locked, no after-job names them:
            -- what step 1 would find (v_jobs stays, for step 2b)
            v_after := '{}';
            v_after_names := '{}';
        ELSE
            v_jobs := NULL;
            v_locked_all := false;
        END IF;
    END IF;

    -- 1. The jobs concerned (of the runs in flight: their outbox rows, by key), read without
    --    locks, then locked in one fixed order (job_id): the job's lock is its job_stat row
    --    (cronbox.lock_job_id), updated below anyway; the job row is not locked. In the same
    --    statement, the after-jobs listing these jobs (fired on success, step 8: locked with
    --    them), and the names they list of these jobs: those jobs are upstreams, whose
    --    statistics are written where they are read (cronbox.job_stat_folded). The locks are
    --    taken by the same statement (every statement started costs its executor start-up),
    --    after its reads: the reads below, statements of their own, see what the locks' holders
    --    committed. Skipped when step 0b read and locked all of that already.
    IF NOT coalesce(v_locked_all, false) THEN
        WITH jobs AS MATERIALIZED (
            -- the jobs' names as the runs carry them (a job's name never changes): the job rows
            -- are read once, by step 3, under the locks
            SELECT array_agg(DISTINCT o.job_id) AS ids, array_agg(DISTINCT o.job_name) AS names
            FROM cronbox.outbox o
            WHERE (p_bucket IS NULL OR o.bucket = p_bucket) AND o.outbox_id = ANY (p_run_ids) AND o.kind = 'run'
        ),
        hit AS MATERIALIZED (
            -- the after-jobs naming these jobs, from their edges (cronbox.job_after_edge, kept
            -- with every after list): one probe of the edges' key per name, no other bucket's
            -- job rows read
            SELECT e.job_id, e.upstream, e.bucket FROM cronbox.job_after_edge e
            WHERE e.upstream = ANY ((SELECT jobs.names FROM jobs)::text[])
        ),
        found AS MATERIALIZED (
            SELECT (SELECT jobs.ids FROM jobs) AS ids,
                   -- the after-jobs (with their buckets) in (bucket, job_id) order: the order of their locks
                   CASE WHEN p_outcome = 'succeeded'
                        THEN coalesce(array_agg(h.job_id ORDER BY h.bucket, h.job_id), '{}') ELSE '{}' END AS after,
                   CASE WHEN p_outcome = 'succeeded' THEN array_agg(h.bucket ORDER BY h.bucket, h.job_id) END AS after_buckets,
                   ARRAY(SELECT DISTINCT x.upstream FROM hit x) AS after_names
            FROM (SELECT DISTINCT x.job_id, x.bucket FROM hit x) h
        ),
        locked AS MATERIALIZED (
            -- with p_bucket, that bucket's rows (the after-jobs of other buckets: below)
            SELECT s.job_id
            FROM cronbox.job_stat s
            WHERE (p_bucket IS NULL OR s.bucket = p_bucket)
              AND s.job_id = ANY (ARRAY(SELECT u.id FROM found f CROSS JOIN LATERAL unnest(f.ids || f.after) AS u(id)))
            ORDER BY s.job_id
            FOR NO KEY UPDATE OF s
        )
        SELECT f.ids, f.after, f.after_buckets, f.after_names
          INTO v_jobs, v_after, v_after_buckets, v_after_names
        FROM found f
        WHERE (SELECT count(*) FROM locked) >= 0;
        -- With p_bucket, the after-jobs of other buckets locked a bucket at a time, in bucket order
        -- (a statement per bucket; their jobs' locks after those of p_bucket).
        IF p_bucket IS NOT NULL AND v_after_buckets IS NOT NULL THEN
            FOR v_b IN SELECT DISTINCT u.b FROM unnest(v_after_buckets) AS u(b) WHERE u.b <> p_bucket ORDER BY u.b LOOP
                PERFORM 1 FROM cronbox.job_stat s
                WHERE s.bucket = v_b
                  AND s.job_id = ANY (ARRAY(SELECT u.id FROM unnest(v_after, v_after_buckets) AS u(id, b) WHERE u.b = v_b))
                ORDER BY s.job_id
                FOR NO KEY UPDATE OF s;
            END LOOP;
        END IF;
    END IF;

    -- 2b. The runs that end here, in one statement under the jobs' locks (every finisher of a
    -- run holds its job's lock, so only start_run, heartbeat, claims and acks can have changed a
    -- row since step 1; docs/architecture.md, "History written once"): each outbox row deleted (for 'lost', only while its lease is still expired: a heartbeat may
    -- have renewed it since the reaper looked) and its history row inserted final, so a crash
    -- leaves the run either in flight or finished, never neither nor both. Rows by key; the
    -- INSERT routes each row to its partition (the day of its run id) without naming the others
    -- in its plan. What the steps below need is read from the deleted rows themselves. On
    -- distributed tables (v_distributed) two statements in one transaction: the delete, then
    -- the inserts from the rows it deleted.
    IF v_jobs IS NOT NULL AND v_distributed THEN
        WITH gone AS (
            DELETE FROM cronbox.outbox o
            WHERE (p_bucket IS NULL OR o.bucket = p_bucket) AND o.outbox_id = ANY (p_run_ids) AND o.kind = 'run'
              AND (p_outcome <> 'lost' OR (o.state IN ('delivered', 'running') AND o.run_lease_until < p_now))
            RETURNING o.*
        )
        -- needs: given back below exactly once, by the transition that ended the run
        SELECT array_agg(ROW(g.outbox_id, g.job_id, g.job_name, g.queue, n.new_state, g.attempt,
                             g.fire_at, g.payload, v_error_of ->> g.outbox_id::text,
                             p_outcome IN ('failed', 'lost') AND NOT g.cancel_requested
                                 AND (p_outcome = 'lost' OR p_retryable))::cronbox.finished_run
                         ORDER BY g.outbox_id),
               array_agg(g.outbox_id ORDER BY g.outbox_id), array_agg(ROW(g.*)::cronbox.outbox ORDER BY g.outbox_id),
               array_agg(n.new_state ORDER BY g.outbox_id),
               array_agg('finished'::text),
               array_agg(g.needs) FILTER (WHERE g.needs IS NOT NULL),
               -- whether step 5 has slots to free (its locks are taken there, in their order)
               (SELECT EXISTS (SELECT 1 FROM cronbox.queue_limit q
                               WHERE q.queue = ANY (ARRAY(SELECT DISTINCT x.queue FROM gone x))))
          INTO v_fin, v_ids, v_rows, v_states, v_verdicts, v_needs, v_limited
        FROM gone g
        CROSS JOIN LATERAL (SELECT CASE WHEN p_outcome = 'succeeded' THEN 'succeeded'
                                        WHEN g.cancel_requested THEN 'cancelled'
                                        ELSE p_outcome END AS new_state) n;
        -- the history rows, from the rows deleted (v_rows), never from the delete's result (Citus
        -- would send that to every worker node: docs/citus.md, "A worker node stopped")
        IF v_rows IS NOT NULL THEN
            WITH finished AS (
                INSERT INTO cronbox.run AS h (run_id, job_id, job_name, queue, fire_at, due_at, state, attempt,
                                         origin, retry_of, payload, priority, dispatched_at, delivered_at,
                                         started_at, finished_at, lease_until, worker, cancel_requested,
                                         result, error, needs, bucket, trouble)
                SELECT g.outbox_id, g.job_id, g.job_name, g.queue, g.fire_at, g.due_at, n.new_state,
                       g.attempt, g.origin, g.retry_of, g.payload, g.priority, g.dispatched_at,
                       -- a report straight from dispatched (the relay's ack with the worker's answer,
                       -- or a worker faster than the ack) was delivered by then; a run started
                       -- before any ack, when it started
                       coalesce(g.delivered_at, g.started_at,
                                CASE WHEN p_outcome IN ('succeeded', 'failed') THEN p_now END),
                       g.started_at, p_now, NULL, g.worker, g.cancel_requested,
                       v_result_of -> g.outbox_id::text,
                       coalesce(v_error_of ->> g.outbox_id::text,
                                CASE WHEN p_outcome = 'cancelled'
                                          OR (p_outcome <> 'succeeded' AND g.cancel_requested)
                                     THEN 'cancelled' END),
                       g.needs, g.bucket, cronbox.run_trouble(n.new_state)
                FROM unnest(v_rows) g
                CROSS JOIN LATERAL (SELECT CASE WHEN p_outcome = 'succeeded' THEN 'succeeded'
                                                WHEN g.cancel_requested THEN 'cancelled'
                                                ELSE p_outcome END AS new_state) n
                RETURNING 1  -- not a COPY on Citus (refused under row security): docs/citus.md
            )
            SELECT count(*) INTO v_n FROM finished;
        END IF;
    ELSIF v_jobs IS NOT NULL THEN
        WITH gone AS (
            DELETE FROM cronbox.outbox o
            WHERE (p_bucket IS NULL OR o.bucket = p_bucket) AND o.outbox_id = ANY (p_run_ids) AND o.kind = 'run'
              AND (p_outcome <> 'lost' OR (o.state IN ('delivered', 'running') AND o.run_lease_until < p_now))
            RETURNING o.*,
                      CASE WHEN p_outcome = 'succeeded' THEN 'succeeded'
                           WHEN o.cancel_requested THEN 'cancelled'
                           ELSE p_outcome END AS new_state
        ),
        finished AS (
            INSERT INTO cronbox.run AS h (run_id, job_id, job_name, queue, fire_at, due_at, state, attempt,
                                     origin, retry_of, payload, priority, dispatched_at, delivered_at,
                                     started_at, finished_at, lease_until, worker, cancel_requested,
                                     result, error, needs, bucket, trouble)
            SELECT g.outbox_id, g.job_id, g.job_name, g.queue, g.fire_at, g.due_at, g.new_state,
                   g.attempt, g.origin, g.retry_of, g.payload, g.priority, g.dispatched_at,
                   -- a report straight from dispatched (the relay's ack with the worker's answer,
                   -- or a worker faster than the ack) was delivered by then; a run started
                   -- before any ack, when it started
                   coalesce(g.delivered_at, g.started_at,
                            CASE WHEN p_outcome IN ('succeeded', 'failed') THEN p_now END),
                   g.started_at, p_now, NULL, g.worker, g.cancel_requested,
                   v_result_of -> g.outbox_id::text,
                   coalesce(v_error_of ->> g.outbox_id::text,
                            CASE WHEN p_outcome = 'cancelled'
                                      OR (p_outcome <> 'succeeded' AND g.cancel_requested)
                                 THEN 'cancelled' END),
                   g.needs, g.bucket, cronbox.run_trouble(g.new_state)
            FROM gone g
            RETURNING 1  -- not a COPY on Citus (refused under row security): docs/citus.md
        )
        -- needs: given back below exactly once, by the transition that ended the run
        SELECT array_agg(ROW(g.outbox_id, g.job_id, g.job_name, g.queue, g.new_state, g.attempt,
                             g.fire_at, g.payload, v_error_of ->> g.outbox_id::text,
                             p_outcome IN ('failed', 'lost') AND NOT g.cancel_requested
                                 AND (p_outcome = 'lost' OR p_retryable))::cronbox.finished_run
                         ORDER BY g.outbox_id),
               array_agg(g.outbox_id ORDER BY g.outbox_id),
               array_agg(g.new_state ORDER BY g.outbox_id),
               array_agg('finished'::text),
               array_agg(g.needs) FILTER (WHERE g.needs IS NOT NULL),
               -- whether step 5 has slots to free (its locks are taken there, in their order)
               (SELECT EXISTS (SELECT 1 FROM cronbox.queue_limit q
                               WHERE q.queue = ANY (ARRAY(SELECT DISTINCT x.queue FROM gone x))))
          INTO v_fin, v_ids, v_states, v_verdicts, v_needs, v_limited
        FROM gone g;
    END IF;
    -- The ids not ended here: only then read again. For 'lost', a run still in flight (its lease
    -- renewed, or never leased) is ignored; the others are read from history in a statement
    -- of their own: a late report (the run is final), a fire that never ran, or an unknown id.
    IF cardinality(v_ids) IS DISTINCT FROM cardinality(p_run_ids) THEN
        v_missing := ARRAY(SELECT DISTINCT u.id FROM unnest(p_run_ids) AS u(id)
                           WHERE NOT (u.id = ANY (coalesce(v_ids, '{}'))) ORDER BY u.id);
        IF p_outcome = 'lost' AND cardinality(v_missing) > 0 THEN
            SELECT coalesce(v_ids, '{}') || array_agg(o.outbox_id),
                   coalesce(v_states, '{}') || array_agg(o.state),
                   coalesce(v_verdicts, '{}') || array_agg('ignored'::text)
              INTO v_ids, v_states, v_verdicts
            FROM cronbox.outbox o
            WHERE (p_bucket IS NULL OR o.bucket = p_bucket) AND o.outbox_id = ANY (v_missing) AND o.kind = 'run';
            v_missing := ARRAY(SELECT u.id FROM unnest(v_missing) AS u(id)
                               WHERE NOT (u.id = ANY (coalesce(v_ids, '{}'))) ORDER BY u.id);
        END IF;
        IF cardinality(v_missing) > 0 THEN
            -- By key, the bounds as values: one partition for one run.
            SELECT coalesce(v_ids, '{}') || array_agg(r.run_id),
                   coalesce(v_states, '{}') || array_agg(r.state),
                   coalesce(v_verdicts, '{}') || array_agg(
                       CASE WHEN r.state IN ('succeeded', 'failed', 'lost', 'cancelled') THEN
                                CASE WHEN p_outcome IN ('succeeded', 'failed') THEN 'late' ELSE 'ignored' END
                            ELSE 'not_reportable' END),
                   array_agg(r.run_id ORDER BY r.run_id)
                       FILTER (WHERE r.state IN ('succeeded', 'failed', 'lost', 'cancelled')
                                 AND p_outcome IN ('succeeded', 'failed')),
                   array_agg(r.bucket ORDER BY r.run_id)
                       FILTER (WHERE r.state IN ('succeeded', 'failed', 'lost', 'cancelled')
                                 AND p_outcome IN ('succeeded', 'failed'))
              INTO v_ids, v_states, v_verdicts, v_late, v_late_buckets
            FROM cronbox.run r
            WHERE (p_bucket IS NULL OR r.bucket = p_bucket)
              AND r.run_id = ANY (v_missing) AND r.run_id BETWEEN v_missing[1] AND v_missing[cardinality(v_missing)];
        END IF;
    END IF;
    IF v_late IS NOT NULL THEN
        -- Kept beside history, never written into it (history rows are left alone once
        -- written): the newest late report of a run wins. The run's state then is the one read
        -- above (a final state, which nothing changes). In the bucket of the run's history row.
        INSERT INTO cronbox.run_late_report AS l (run_id, report, bucket)
        SELECT x.id, jsonb_build_object(
                   'report', p_outcome, 'at', p_now, 'state_then', x.state,
                   'result', v_result_of -> x.id::text, 'error', v_error_of ->> x.id::text),
               b.bucket
        FROM unnest(v_ids, v_states, v_verdicts) AS x(id, state, verdict)
        JOIN unnest(v_late, v_late_buckets) AS b(id, bucket) ON b.id = x.id
        WHERE x.verdict = 'late'
        ON CONFLICT ON CONSTRAINT run_late_report_pkey DO UPDATE SET report = excluded.report;
    END IF;

    IF v_fin IS NOT NULL THEN
        IF cardinality(v_fin) = 1 THEN  -- one run: an assignment, no statement of its own
            v_fin_jobs := ARRAY[(v_fin[1]).job_id];
        ELSE
            v_fin_jobs := ARRAY(SELECT DISTINCT f.job_id FROM unnest(v_fin) f);
        END IF;

        -- 3. Job bookkeeping: one statement for every end. The statistics of a job a policy
        --    reads while deciding (active runs for overlap, last success of an upstream) are
        --    updated here; the others go into one change row (cronbox.job_stat_folded).
        --    Each run with what its job's policy decides: retry now (attempts left), or attempts
        --    exhausted (on_error decides); the job by its key, one probe per run (LIMIT keeps the
        --    subquery a parameterized probe). folded: cronbox.job_stat_folded's test written out
        --    (Citus plans no SQL function that reads a table inside a data-modifying statement).
        --    The failures' decisions are kept for step 3b (v_decided).
        WITH
        decide AS MATERIALIZED (
            SELECT f.run_id, f.job_id, f.job_name, f.queue, f.state, f.attempt, f.fire_at, f.payload, f.error,
                   f.retryable, j.max_attempts, j.on_error, j.retry_delay, j.retry_max_delay,
                   j.priority, j.paused AS was_paused, j.every_mode,
                   f.state IN ('failed', 'lost') AND f.retryable AND f.attempt < j.max_attempts AS retry_now,
                   f.state IN ('failed', 'lost') AND NOT (f.retryable AND f.attempt < j.max_attempts) AS exhausted,
                   j.bucket, j.queue AS job_queue, j.notify IS NOT NULL AS notifies,
                   j.overlap = 'allow' AND j.every_mode <> 'fixed_delay'
                   AND NOT f.job_name = ANY (coalesce(v_after_names, '{}'))
                   AND ((SELECT NOT EXISTS (SELECT 1 FROM cronbox.job_dependency))
                        OR (NOT EXISTS (SELECT 1 FROM cronbox.job_dependency d WHERE d.job_id = f.job_id)
                            AND NOT EXISTS (SELECT 1 FROM cronbox.job_dependency d WHERE d.upstream_id = f.job_id))) AS folded
            FROM unnest(v_fin) f
            CROSS JOIN LATERAL (
                SELECT j.max_attempts, j.on_error, j.retry_delay, j.retry_max_delay, j.priority,
                       j.paused, j.every_mode, j.overlap, j.bucket, j.queue, j.notify
                FROM cronbox.job j
                WHERE (p_bucket IS NULL OR j.bucket = p_bucket) AND j.job_id = f.job_id LIMIT 1) j
        ),
        -- Per job: the counts of this call (one row per job).
        per_job AS MATERIALIZED (
            SELECT d.job_id, min(d.bucket) AS bucket, bool_and(d.folded) AS folded, count(*) AS n,
                   max(d.run_id) AS last_run,
                   (array_agg(d.state ORDER BY d.run_id DESC))[1] AS last_state,
                   count(*) FILTER (WHERE d.state = 'succeeded') AS n_ok,
                   count(*) FILTER (WHERE d.state = 'lost') AS n_lost,
                   count(*) FILTER (WHERE d.exhausted AND d.attempt <= d.max_attempts) AS n_runs_failed
            FROM decide d GROUP BY d.job_id
        ),
        -- The per-job counts as arrays in job_id order: a job_stat row's values are at the
        -- position width_bucket (a binary search) gives its job_id (docs/architecture.md, SQL
        -- conventions: no join, whatever the plan).
        counts AS MATERIALIZED (
            SELECT array_agg(c.job_id ORDER BY c.job_id) AS ids,
                   array_agg(c.n ORDER BY c.job_id) AS n,
                   array_agg(c.last_run ORDER BY c.job_id) AS last_run,
                   -- the state as its position in a constant list: a subscript into an array
                   -- of text walks every element before it (quadratic in the jobs of a batch)
                   array_agg(array_position(ARRAY['succeeded', 'failed', 'lost', 'cancelled'], c.last_state)
                             ORDER BY c.job_id) AS last_state,
                   array_agg(c.n_ok ORDER BY c.job_id) AS n_ok,
                   array_agg(c.n_runs_failed ORDER BY c.job_id) AS n_runs_failed,
                   array_agg(c.n_lost ORDER BY c.job_id) AS n_lost
            FROM per_job c
            WHERE NOT c.folded
        ),
        -- The statistics row (narrow, HOT: cronbox.job_stat), by key (= ANY), never by a join.
        stat AS (
            UPDATE cronbox.job_stat s SET
                active_runs = greatest(s.active_runs - c.n[width_bucket(s.job_id, c.ids)], 0),
                last_run_state = CASE WHEN c.last_run[width_bucket(s.job_id, c.ids)] >= coalesce(s.last_run_id, 0)
                                      THEN (ARRAY['succeeded', 'failed', 'lost', 'cancelled'])[c.last_state[width_bucket(s.job_id, c.ids)]]
                                      ELSE s.last_run_state END,
                last_success_at = CASE WHEN c.n_ok[width_bucket(s.job_id, c.ids)] > 0
                                       THEN greatest(s.last_success_at, p_now)
                                       ELSE s.last_success_at END,
                -- runs, not attempts: a run counts once, when its attempts are exhausted
                -- (the run_failed notification's condition); an attempt retried is no failure yet
                consecutive_failures = CASE WHEN c.n_ok[width_bucket(s.job_id, c.ids)] > 0 THEN 0
                                            ELSE s.consecutive_failures + c.n_runs_failed[width_bucket(s.job_id, c.ids)] END,
                consecutive_crashes = CASE WHEN c.n_ok[width_bucket(s.job_id, c.ids)] > 0 THEN 0
                                           ELSE s.consecutive_crashes + c.n_lost[width_bucket(s.job_id, c.ids)] END
            FROM counts c
            WHERE (p_bucket IS NULL OR s.bucket = p_bucket) AND s.job_id = ANY (c.ids)
        )
        SELECT bool_or(d.state IN ('failed', 'lost')),
               -- fixed_delay jobs without a retry of this run: their next fire comes from now
               coalesce(array_agg(d.job_id) FILTER (
                   WHERE d.every_mode = 'fixed_delay'
                     AND NOT (d.state IN ('failed', 'lost') AND d.retryable
                              AND (d.attempt < d.max_attempts OR d.on_error = 'retry_soon'))), '{}'),
               (SELECT bool_and(p.folded) FROM per_job p),
               -- 6 (read here, released below). Overlap buffers: the job's earliest held fire
               -- may go now.
               ARRAY(SELECT DISTINCT ON (h.job_id) h.future_id
                     FROM cronbox.job_future h
                     WHERE (p_bucket IS NULL OR h.bucket = p_bucket) AND h.job_id = ANY (v_fin_jobs) AND h.hold = 'overlap'
                     ORDER BY h.job_id, h.fire_at),
               jsonb_agg(to_jsonb(d) - 'folded') FILTER (WHERE d.state IN ('failed', 'lost')),
               -- the jobs no policy reads while deciding: their counts, for their change rows
               (SELECT jsonb_agg(to_jsonb(c)) FROM per_job c WHERE c.folded)
          INTO v_failures, v_fixed_delay, v_all_folded, v_release, v_decided, v_folded_counts
        FROM decide d;
        -- One change row for all of them per bucket, folded into job_stat by the poller within a
        -- second (cronbox.fold_job_stats); from the counts read above, never from a result of the
        -- statement that read them (Citus would send that to every worker node: docs/citus.md,
        -- "A worker node stopped").
        IF v_folded_counts IS NOT NULL THEN
            WITH change AS (
                INSERT INTO cronbox.job_stat_change (job_ids, active, last_fire, last_run, last_state,
                                                     ok, failures, crashes, missed, success_at, bucket)
                SELECT array_agg(c.job_id), array_agg((-c.n)::integer), array_agg(NULL::timestamptz),
                       array_agg(c.last_run), array_agg(c.last_state), array_agg(c.n_ok::integer),
                       array_agg(c.n_runs_failed::integer), array_agg(c.n_lost::integer), array_agg(0::bigint), p_now, c.bucket
                FROM jsonb_to_recordset(v_folded_counts) AS c(job_id bigint, bucket integer, n bigint, last_run bigint,
                                                              last_state text, n_ok bigint, n_lost bigint, n_runs_failed bigint)
                GROUP BY c.bucket  -- a row per bucket of the jobs (one on plain PostgreSQL)
                RETURNING 1  -- not a COPY on Citus (refused under row security): docs/citus.md
            )
            SELECT count(*) INTO v_n FROM change;
        END IF;

        -- 3b. Failed or lost runs (a success or a cancel never gets here: a report's usual
        --     call starts none of these writes): retries (a retry is a new future), on_error,
        --     notifications. One statement.
        IF v_failures THEN
            WITH
            -- the failures' decisions, as step 3 read them; NOT MATERIALIZED: read from v_decided
            -- where each insert reads it, never as a result of this statement (Citus would send that
            -- to every worker node: docs/citus.md, "A worker node stopped")
            decide AS NOT MATERIALIZED (
                SELECT d.* FROM jsonb_to_recordset(v_decided) AS d(
                    run_id bigint, job_id bigint, job_name text, queue text, state text, attempt integer,
                    fire_at timestamptz, payload jsonb, error text, retryable boolean, max_attempts integer,
                    on_error text, retry_delay interval, retry_max_delay interval, priority integer,
                    was_paused boolean, every_mode text, retry_now boolean, exhausted boolean,
                    bucket integer, job_queue text, notifies boolean)
            ),
            retry AS (
                INSERT INTO cronbox.job_future (job_id, fire_at, due_at, priority, attempt, origin,
                                                payload, retry_of, created_at, bucket, queue)
                SELECT d.job_id, d.fire_at,
                       p_now + cronbox.retry_backoff(d.retry_delay, d.retry_max_delay, d.attempt),
                       d.priority, d.attempt + 1, 'retry', d.payload, d.run_id, p_now, d.bucket, d.job_queue
                FROM decide d
                WHERE d.retry_now OR (d.exhausted AND d.retryable AND d.on_error = 'retry_soon')
                ON CONFLICT ON CONSTRAINT job_future_fire_unique DO NOTHING
                RETURNING 1
            ),
            per_job AS MATERIALIZED (
                SELECT d.job_id, bool_or(d.was_paused) AS was_paused,
                       (array_agg(format('paused after failure: run %s (attempt %s) %s: %s',
                                         d.run_id, d.attempt, d.state, coalesce(d.error, 'no error text'))
                                  ORDER BY d.run_id DESC)
                            FILTER (WHERE d.exhausted AND d.on_error = 'pause'))[1] AS pause_reason
                FROM decide d GROUP BY d.job_id
            ),
            -- Rare (on_error = 'pause'): the reason looked up per job paused.
            book AS (
                UPDATE cronbox.job j SET
                    paused = true,
                    paused_reason = (SELECT c.pause_reason FROM per_job c WHERE c.job_id = j.job_id),
                    updated_at = p_now
                WHERE (p_bucket IS NULL OR j.bucket = p_bucket)
                  AND j.job_id = ANY (ARRAY(SELECT c.job_id FROM per_job c WHERE c.pause_reason IS NOT NULL))
                  AND NOT j.paused
                RETURNING j.job_id, j.name, j.paused_reason AS pause_reason, j.bucket,
                          NOT (SELECT c.was_paused FROM per_job c WHERE c.job_id = j.job_id) AS paused_now
            ),
            book_fire AS (  -- the paused flag's copy beside the saturation state (cronbox.job_fire)
                UPDATE cronbox.job_fire f SET paused = true
                WHERE (p_bucket IS NULL OR f.bucket = p_bucket) AND f.job_id = ANY (ARRAY(SELECT b.job_id FROM book b))
            ),
            notes AS (
                INSERT INTO cronbox.outbox (run_id, queue, kind, message, created_at, available_at, bucket)
                SELECT d.run_id, 'cronbox.notifications', 'notification',
                       jsonb_build_object('event', 'run_failed', 'job', d.job_name, 'run_id', d.run_id,
                                          'fire_at', d.fire_at, 'attempt', d.attempt, 'state', d.state,
                                          'error', d.error, 'on_error', d.on_error, 'at', p_now,
                                          'idempotency_key', 'run_failed:' || d.run_id),
                       p_now, p_now, d.bucket
                FROM decide d
                WHERE d.exhausted AND d.attempt <= d.max_attempts
                RETURNING outbox_id
            )
            SELECT (SELECT count(*) FROM retry),
                   array_agg(b.job_id), array_agg(b.name), array_agg(b.pause_reason), array_agg(b.bucket),
                   -- only when a job has recipients of its own (job.notify)
                   (SELECT bool_or(d.notifies) FROM decide d),
                   (SELECT array_agg(n.outbox_id) FROM notes n WHERE (SELECT bool_or(d.notifies) FROM decide d))
              INTO v_n, v_paused_ids, v_paused_names, v_paused_reasons, v_paused_buckets, v_notifies, v_notes
            FROM book b
            WHERE b.paused_now;
            v_woken := v_woken + v_n;
            -- the schedules paused now: their notifications, from what the statement above
            -- returned, in a statement of their own (as the inserts above: no result read)
            IF v_paused_ids IS NOT NULL THEN
                WITH paused_notes AS (
                    INSERT INTO cronbox.outbox (run_id, queue, kind, message, created_at, available_at, bucket)
                    SELECT NULL, 'cronbox.notifications', 'notification',
                           jsonb_build_object('event', 'schedule_paused', 'job', b.name,
                                              'reason', b.pause_reason, 'at', p_now,
                                              'idempotency_key', 'schedule_paused:' || b.job_id || ':'
                                                                 || extract(epoch FROM p_now)::text),
                           p_now, p_now, b.bucket
                    FROM unnest(v_paused_ids, v_paused_names, v_paused_reasons, v_paused_buckets)
                         AS b(job_id, name, pause_reason, bucket)
                    RETURNING outbox_id
                )
                SELECT CASE WHEN v_notifies THEN coalesce(v_notes, '{}') || array_agg(n.outbox_id) ELSE v_notes END
                  INTO v_notes
                FROM paused_notes n;
            END IF;
            -- the jobs' own recipients of these notifications (job.notify)
            IF v_notes IS NOT NULL THEN
                PERFORM cronbox.notify_stakeholders(v_notes, p_bucket);
            END IF;
        END IF;
        -- Each step below that has nothing to do is skipped, not run empty: every statement
        -- started costs its executor start-up, which is most of a one-run report's time.
        -- The change log says who paused the schedule and why.
        IF v_paused_ids IS NOT NULL THEN
            PERFORM cronbox.record_change(p.job_id, p.name, 'paused_after_failure', p.reason, p_now)
            FROM unnest(v_paused_ids, v_paused_names, v_paused_reasons) AS p(job_id, name, reason);
        END IF;

        -- 4. fixed_delay jobs: the next fire is `every` after this one finished (if no retry).
        IF cardinality(v_fixed_delay) > 0 THEN
            PERFORM cronbox.schedule_next_fixed_delay(u.job_id, p_now, p_bucket)
            FROM unnest(v_fixed_delay) AS u(job_id);
        END IF;

        -- 5. Limited queues: free the slots and release that many queue-held futures (no call
        --    when none of these queues has a limit).
        IF NOT coalesce(v_limited, true) THEN
            NULL;
        ELSIF cardinality(v_fin) = 1 THEN  -- one run: an assignment, no statement of its own
            v_n := cronbox.release_queue_slots(ARRAY[(v_fin[1]).queue], ARRAY[1::bigint], p_now);
        ELSE
            PERFORM cronbox.release_queue_slots(array_agg(c.queue), array_agg(c.n), p_now)
            FROM (SELECT f.queue, count(*) AS n FROM unnest(v_fin) f GROUP BY f.queue) c;
        END IF;

        -- 5b. Resource pools: the units these runs took, given back; waiting fires that fit go.
        IF v_needs IS NOT NULL THEN
            PERFORM cronbox.release_pool_units(array_agg(c.pool ORDER BY c.pool), array_agg(c.n ORDER BY c.pool), p_now)
            FROM (SELECT e.key AS pool, sum(e.value::text::bigint)::bigint AS n
                  FROM unnest(v_needs) AS n(needs) CROSS JOIN LATERAL jsonb_each(n.needs) e
                  GROUP BY e.key) c;
        END IF;

        -- 6. Overlap buffers: the job's earliest held fire (read with the bookkeeping) goes now.
        IF cardinality(v_release) > 0 THEN
            v_woken := v_woken + cronbox.release_futures(v_release, CASE WHEN p_bucket IS NOT NULL THEN ARRAY[p_bucket] END);
        END IF;
    END IF;

    IF p_outcome = 'succeeded' AND v_fin IS NOT NULL AND NOT coalesce(v_all_folded, false) THEN
        -- 7. Jobs gated on these (add_dependency): their waiting fires look again. (A job whose
        --    statistics are folded is nobody's upstream: cronbox.job_stat_folded.) With p_bucket,
        --    a statement per bucket of the gated jobs (cronbox.job_dependency.bucket, read first:
        --    none gated, no more; a dependency whose bucket is not known: every bucket).
        IF p_bucket IS NULL THEN
            v_release := ARRAY(
                SELECT f.future_id FROM cronbox.job_future f
                WHERE f.hold = 'dependency'
                  AND f.job_id = ANY (ARRAY(SELECT d.job_id FROM cronbox.job_dependency d
                                            WHERE d.upstream_id = ANY (v_fin_jobs))));
            IF cardinality(v_release) > 0 THEN
                v_woken := v_woken + cronbox.release_futures(v_release);
            END IF;
        ELSE
            SELECT array_agg(DISTINCT d.bucket), bool_or(d.bucket IS NULL) INTO v_gated, v_gated_unknown
            FROM cronbox.job_dependency d WHERE d.upstream_id = ANY (v_fin_jobs);
            IF v_gated_unknown THEN  -- every bucket, one statement
                v_gated := ARRAY[NULL::integer];
            END IF;
            FOREACH v_b IN ARRAY coalesce(v_gated, '{}') LOOP
                v_release := ARRAY(
                    SELECT f.future_id FROM cronbox.job_future f
                    WHERE (v_b IS NULL OR f.bucket = v_b) AND f.hold = 'dependency'
                      AND f.job_id = ANY (ARRAY(SELECT d.job_id FROM cronbox.job_dependency d
                                                WHERE d.upstream_id = ANY (v_fin_jobs)
                                                  AND (v_b IS NULL OR d.bucket = v_b))));
                IF cardinality(v_release) > 0 THEN
                    v_woken := v_woken + cronbox.release_futures(v_release, CASE WHEN v_b IS NOT NULL THEN ARRAY[v_b] END);
                END IF;
            END LOOP;
        END IF;

        -- 8. after-jobs: fire once all their upstreams succeeded since their last fire
        --    (job_fire.frontier marks that fire for kind 'after'). Fresh statements, so they see
        --    the successes just recorded and those of transactions that held these locks. First
        --    the last successes of every upstream the after-jobs list (from the edges; each
        --    upstream's job and statistics in the bucket its name gives, cronbox.job_bucket: a
        --    statement per bucket, one without buckets), then, per bucket of the after-jobs, those
        --    whose every upstream succeeded since their last fire, fired: no statement reads a
        --    job of another bucket than its filter's.
        IF cardinality(v_after) > 0 THEN
            SELECT array_agg(DISTINCT e.upstream) INTO v_up_all
            FROM cronbox.job_after_edge e WHERE e.job_id = ANY (v_after);
            v_up_names := '{}';
            v_up_success := '{}';
            FOR v_b IN SELECT DISTINCT CASE WHEN p_bucket IS NOT NULL THEN cronbox.job_bucket(u.name) END
                       FROM unnest(v_up_all) AS u(name) LOOP
                v_up_in := CASE WHEN v_b IS NULL THEN v_up_all
                                ELSE ARRAY(SELECT u.name FROM unnest(v_up_all) AS u(name)
                                           WHERE cronbox.job_bucket(u.name) = v_b) END;
                -- each upstream by its name, then its statistics by key: probes, not joins
                SELECT v_up_names || array_agg(u.name), v_up_success || array_agg(x.at)
                  INTO v_up_names, v_up_success
                FROM unnest(v_up_in) AS u(name)
                CROSS JOIN LATERAL (
                    SELECT (SELECT s.last_success_at FROM cronbox.job_stat s
                            WHERE (v_b IS NULL OR s.bucket = v_b) AND s.job_id = j.job_id) AS at
                    FROM cronbox.job j WHERE (v_b IS NULL OR j.bucket = v_b) AND j.name = u.name LIMIT 1) x;
            END LOOP;
            FOR v_b IN SELECT DISTINCT CASE WHEN p_bucket IS NOT NULL THEN u.b END
                       FROM unnest(v_after_buckets) AS u(b) LOOP
                WITH ready AS (
                    SELECT a.job_id, a.priority, a.bucket, a.queue
                    FROM cronbox.job a
                    JOIN cronbox.job_fire af ON af.job_id = a.job_id
                    WHERE (v_b IS NULL OR (a.bucket = v_b AND af.bucket = v_b))
                      AND a.job_id = ANY (v_after) AND a.kind = 'after'
                      -- each upstream's last success by its position among the names read above
                      AND NOT EXISTS (
                          SELECT 1 FROM unnest(a.after) AS n(name)
                          CROSS JOIN LATERAL (SELECT v_up_success[array_position(v_up_names, n.name)]
                                                  AS last_success_at) us
                          WHERE us.last_success_at IS NULL
                             OR (af.frontier IS NOT NULL AND us.last_success_at <= af.frontier))
                ),
                mark AS (
                    UPDATE cronbox.job_fire a SET frontier = p_now
                    WHERE (v_b IS NULL OR a.bucket = v_b) AND a.job_id = ANY (ARRAY(SELECT ready.job_id FROM ready))
                ),
                ins AS (
                    INSERT INTO cronbox.job_future (job_id, fire_at, due_at, priority, origin, created_at, bucket, queue)
                    SELECT ready.job_id, p_now, p_now, ready.priority, 'dependency', p_now, ready.bucket, ready.queue FROM ready
                    ON CONFLICT ON CONSTRAINT job_future_fire_unique DO NOTHING
                    RETURNING 1
                )
                SELECT count(*) INTO v_n FROM ins;
                v_woken := v_woken + v_n;
            END LOOP;
        END IF;
    END IF;

    IF v_woken > 0 THEN
        PERFORM pg_notify('cronbox_future', '');
    END IF;
    IF v_failures THEN  -- notifications were written (step 3b)
        PERFORM pg_notify('cronbox_outbox', '');
    END IF;

    IF v_fast IS NOT NULL THEN  -- step 0b ended some of them, steps 1-8 the others
        v_ids := coalesce(v_ids, '{}') || v_fast;
        v_states := coalesce(v_states, '{}') || array_fill('succeeded'::text, ARRAY[cardinality(v_fast)]);
        v_verdicts := coalesce(v_verdicts, '{}') || array_fill('finished'::text, ARRAY[cardinality(v_fast)]);
        p_run_ids := v_asked;
    ELSIF cardinality(p_run_ids) = 1 THEN  -- one run: assignments, no statement
        run_id := p_run_ids[1];
        state := CASE WHEN v_ids[1] = p_run_ids[1] THEN v_states[1] END;
        verdict := CASE WHEN v_ids[1] = p_run_ids[1] THEN v_verdicts[1] ELSE 'not_found' END;
        RETURN NEXT;
        RETURN;
    END IF;
    RETURN QUERY
        SELECT u.id, x.state, coalesce(x.verdict, 'not_found')
        FROM unnest(p_run_ids) u(id)
        LEFT JOIN unnest(v_ids, v_states, v_verdicts) AS x(run_id, state, verdict) ON x.run_id = u.id;
END
$$;

COMMENT ON FUNCTION cronbox.finish_runs(bigint[],text,jsonb[],text[],boolean,timestamp with time zone,integer) IS
'Internal: moves runs to a final state (succeeded, failed, lost, cancelled) set-based, with job bookkeeping, retries (new attempts as futures), on_error, notifications and releases of held futures. Late reports go to cronbox.run_late_report. Returns per run its state and verdict (finished, late, ignored, not_reportable, not_found). p_bucket: the runs'' bucket, every statement on its rows but the after-jobs of other buckets a success fires (NULL: the ids bucket by bucket where Citus distributes the outbox, cronbox.finish_runs_by_bucket; no filter elsewhere).';

ALTER FUNCTION cronbox.finish_runs(bigint[],text,jsonb[],text[],boolean,timestamp with time zone,integer) OWNER TO cronbox_owner;
REVOKE ALL ON FUNCTION cronbox.finish_runs(bigint[],text,jsonb[],text[],boolean,timestamp with time zone,integer) FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
