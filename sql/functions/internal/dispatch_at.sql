-- Internal: the body of cronbox.dispatch, with the time as its last parameter p_now. The public
-- cronbox.dispatch passes now(); no cronbox role may execute this one (tests call it as the
-- owner or a superuser to fix the clock).
-- cronbox.dispatch_at(p_limit, p_now): decides, in one transaction, what happens to up to p_limit
-- due ready futures, shared between the queues with due work (each up to its share, lower
-- priority first, oldest first), and writes it: run + outbox row (dispatched), a
-- skipped or failed run row, or a hold on the future. One transaction: a fire is dispatched
-- exactly once whatever crashes. Locks, in the walk of job_future_lane_idx (queue by queue,
-- priority by priority, due order): each future's job (its job_stat row FOR NO KEY UPDATE SKIP LOCKED, as
-- cronbox.try_lock_job_id), then the future (FOR UPDATE SKIP LOCKED); a future whose job is busy
-- elsewhere is passed over and not counted in p_limit. Then the queue_limit rows concerned.
-- Any number of pollers may call it.
-- Pick and lock, then decide and write (cronbox.dispatch_locked) with snapshots taken under the locks.
-- The job's counters and last-run columns are in cronbox.job_stat (the job row is only read).
-- p_jobs: only futures of these jobs (the poller isolating a job that makes a batch fail).
-- p_grace: a scheduled fire due more than p_grace ago with a newer fire of its job in the same
-- batch was missed (the poller was down or behind): recorded 'missed' unless catchup = 'all',
-- never 'overlap: skipped'. NULL: no such check.
CREATE OR REPLACE FUNCTION cronbox.dispatch_at(
    p_limit integer DEFAULT 1000,
    p_jobs bigint[] DEFAULT NULL,
    p_grace interval DEFAULT NULL,
    p_bucket integer DEFAULT NULL,
    p_now timestamptz DEFAULT now()
) RETURNS TABLE (dispatched integer, skipped integer, failed integer, held integer, next_due timestamptz)
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
-- Row estimates through CTEs are rough; JIT compiling this short statement costs more than it runs.
SET jit = off
SET enable_seqscan = off  -- a plan kept from an empty table: docs/architecture.md, SQL conventions
SET enable_bitmapscan = off  -- the futures are walked in due order, never gathered whole and sorted
AS $$
DECLARE
    v_futures bigint[] := '{}';
    v_jobs bigint[] := '{}';
    v_lane_queue text[];    -- the due lanes (queue, priority): queues in turn, priorities in order
    v_lane_prio integer[];
    v_queues integer;       -- queues with due work
    v_share integer;        -- the most futures one queue takes in this walk
    v_walks integer[];      -- the bucket sets walked (cronbox.bucket_walks), a statement series each
    v_set integer[];
    v_start integer;
    v_left integer;         -- what the batch has left for this set
    v_taken integer := 0;
    v_dispatched integer := 0;
    v_skipped integer := 0;
    v_failed integer := 0;
    v_held integer := 0;
    d record;
BEGIN
    -- Runs as cronbox_runner, whom row security lets through (docs/architecture.md, "Row security
    -- on the batch paths"): only an all-seeing caller may, as only such roles may call it.
    IF NOT cronbox.caller_writes_all() THEN
        RAISE EXCEPTION 'dispatch: only a caller that may act on every schedule may call it'
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    IF p_limit IS NULL OR p_limit < 1 THEN
        RAISE EXCEPTION 'p_limit: must be at least 1, got %', p_limit USING ERRCODE = 'invalid_parameter_value';
    END IF;
    -- By bucket (docs/citus.md, "A queue spans buckets"): every statement below reads and
    -- writes one set of buckets, visited as cronbox.bucket_walks says: one bucket per set where
    -- job_future is distributed by bucket (one shard), in turn from a random one until the
    -- batch is full; anywhere else one set of every bucket (plain PostgreSQL: {0}), one pass.
    v_walks := cronbox.bucket_walks('cronbox.job_future', p_bucket);
    v_start := CASE WHEN array_length(v_walks, 1) > 1 THEN floor(random() * array_length(v_walks, 1))::integer ELSE 0 END;
    FOR w IN 0 .. array_length(v_walks, 1) - 1 LOOP
        EXIT WHEN v_taken >= p_limit;
        v_set := ARRAY(SELECT unnest(v_walks[(v_start + w) % array_length(v_walks, 1) + 1 : (v_start + w) % array_length(v_walks, 1) + 1]));
        v_left := p_limit - v_taken;
        v_futures := '{}';
        v_jobs := '{}';

        -- 1. The queues with due work, each with its share of the batch (docs/architecture.md,
        --    "Fair dispatch"): a queue's burst of due fires takes its share, the other queues'
        --    due fires go in the same batch, as each queue of River or Oban fetches for itself.
        --    Each queue's priorities with their earliest due time (a loose scan of
        --    job_future_lane_idx), the queues in an order drawn afresh per call (more queues with
        --    due work than the batch has rows: each is served in turn, none starved).
        SELECT array_agg(l.queue ORDER BY l.turn, l.priority), array_agg(l.priority ORDER BY l.turn, l.priority),
               count(DISTINCT l.queue)
          INTO v_lane_queue, v_lane_prio, v_queues
        FROM (SELECT r.queue, r.priority, md5(r.queue || p_now::text) AS turn
              FROM cronbox.ready_lanes(v_set) r WHERE r.due_at <= p_now) l;
        CONTINUE WHEN v_queues = 0;
        v_share := ceil(v_left::numeric / v_queues)::integer;

        -- 2. Each queue's due futures, lowest priority first, oldest first within a priority, up
        --    to its share (rows are only read and locked as far as the share needs), and their
        --    jobs, locked so that one poller at a time decides for a job (a job busy elsewhere is
        --    passed over until the next call). Everyone who changes a job's definition or
        --    statistics holds this lock. A second walk gives what queues with less due work left
        --    of the batch to those with more.
        FOR v_round IN 1..2 LOOP
            WITH
            lane AS (SELECT u.queue, u.n FROM unnest(v_lane_queue) WITH ORDINALITY AS u(queue, n)),
            -- each queue's lanes are a range of the arrays, in the order drawn above
            turn AS (SELECT lane.queue, min(lane.n)::integer AS lo, max(lane.n)::integer AS hi
                     FROM lane GROUP BY lane.queue),
            picked AS MATERIALIZED (
                SELECT x.*
                FROM (SELECT turn.lo, turn.hi FROM turn ORDER BY turn.lo) q
                CROSS JOIN LATERAL (
                    SELECT y.future_id, y.job_id
                    FROM generate_series(q.lo, q.hi) AS i
                    CROSS JOIN LATERAL (
                        SELECT f.future_id, f.job_id
                        FROM cronbox.job_future f
                        -- one range of job_future_lane_idx, written as a range of its whole key:
                        -- no other index serves it (an index on priority and due time, filtering
                        -- the queue, would read every other queue's burst first)
                        WHERE f.hold IS NULL AND f.bucket = ANY (v_set)
                          AND (f.queue, f.priority, f.due_at) >= (v_lane_queue[i], v_lane_prio[i], '-infinity'::timestamptz)
                          AND (f.queue, f.priority, f.due_at) <= (v_lane_queue[i], v_lane_prio[i], p_now)
                          AND (p_jobs IS NULL OR f.job_id = ANY (p_jobs))
                          AND (v_round = 1 OR f.future_id <> ALL (v_futures))  -- taken in the first walk
                          -- The job's lock (its job_stat row: cronbox.lock_job_id), taken in the
                          -- walk, so a future whose job is busy elsewhere (a bulk pause or resume,
                          -- a saturation pass) is passed over and does not count against the
                          -- share. A probe by key per future walked (a sub-SELECT with a lock is
                          -- never turned into a join).
                          AND EXISTS (SELECT 1 FROM cronbox.job_stat s WHERE s.bucket = ANY (v_set) AND s.job_id = f.job_id
                                      FOR NO KEY UPDATE SKIP LOCKED)
                        ORDER BY f.queue, f.priority, f.due_at
                        LIMIT v_share
                        FOR UPDATE OF f SKIP LOCKED
                    ) y
                    LIMIT v_share
                ) x
                LIMIT v_left - cardinality(v_futures)
            )
            SELECT v_futures || array_agg(p.future_id), v_jobs || array_agg(DISTINCT p.job_id)
              INTO v_futures, v_jobs
            FROM picked p;
            -- one queue, or the batch is full, or no queue took its whole share: nothing to give
            EXIT WHEN v_queues = 1 OR cardinality(v_futures) >= v_left OR cardinality(v_futures) < v_share;
            v_share := v_left - cardinality(v_futures);
        END LOOP;
        IF v_queues > 1 THEN
            v_jobs := ARRAY(SELECT DISTINCT j FROM unnest(v_jobs) AS j);
        END IF;
        CONTINUE WHEN cardinality(v_futures) = 0;
        v_taken := v_taken + cardinality(v_futures);

        -- 3. Decide and write (cronbox.dispatch_locked, shared with early dispatch), in a new
        --    statement whose snapshot is taken with the locks held.
        SELECT * INTO d FROM cronbox.dispatch_locked(v_futures, v_jobs, p_grace, p_now, v_set);
        v_dispatched := v_dispatched + d.dispatched;
        v_skipped := v_skipped + d.skipped;
        v_failed := v_failed + d.failed;
        v_held := v_held + d.held;  -- (and the jobs that finished with it logged: dispatch_locked)
    END LOOP;
    RETURN QUERY SELECT v_dispatched, v_skipped, v_failed, v_held, cronbox.next_due_in(v_walks, p_bucket);
END
$$;

COMMENT ON FUNCTION cronbox.dispatch_at(integer, bigint[], interval, integer, timestamp with time zone) IS
'Internal (no cronbox role may execute it): the body of cronbox.dispatch(integer, bigint[], interval, integer) with the time as p_now; tests use it to fix the clock. Poller: decides for up to p_limit due ready futures, shared between the queues with due work (lower priority first within a queue; paused -> held; dependency gate; overlap policy; queue limit) and writes run + outbox rows, skipped/failed runs or holds, in one transaction (SKIP LOCKED; safe with many pollers). p_jobs restricts it to those jobs; with p_grace, late scheduled fires superseded by a newer due fire of their job are recorded missed (catch-up), not skipped. Returns the counts and the next due time.';

ALTER FUNCTION cronbox.dispatch_at(integer, bigint[], interval, integer, timestamp with time zone) OWNER TO cronbox_runner;
REVOKE ALL ON FUNCTION cronbox.dispatch_at(integer, bigint[], interval, integer, timestamp with time zone) FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
