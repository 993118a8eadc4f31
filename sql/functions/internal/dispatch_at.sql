-- Internal: the body of cronbox.dispatch, with the time as its last parameter p_now. The public
-- cronbox.dispatch passes now(); no cronbox role may execute this one (tests call it as the
-- owner or a superuser to fix the clock).
-- cronbox.dispatch_at(p_limit, p_now): decides, in one statement, what happens to up to p_limit
-- due ready futures, lower priority first, and writes it: run + outbox row (dispatched), a
-- skipped or failed run row, or a hold on the future. One transaction: a fire is dispatched
-- exactly once whatever crashes. Locks, in the walk of job_future_ready_idx (priority by
-- priority, due order): each future's job (its job_stat row FOR NO KEY UPDATE SKIP LOCKED, as
-- cronbox.try_lock_job_id), then the future (FOR UPDATE SKIP LOCKED); a future whose job is busy
-- elsewhere is passed over and not counted in p_limit. Then the queue_limit rows concerned.
-- Any number of pollers may call it.
-- Two statements: pick and lock, then decide and write with a snapshot taken under the locks.
-- The job's counters and last-run columns are in cronbox.job_stat (the job row is only read).
-- p_jobs: only futures of these jobs (the poller isolating a job that makes a batch fail).
-- p_grace: a scheduled fire due more than p_grace ago with a newer fire of its job in the same
-- batch was missed (the poller was down or behind): recorded 'missed' unless catchup = 'all',
-- never 'overlap: skipped'. NULL: no such check.
CREATE OR REPLACE FUNCTION cronbox.dispatch_at(
    p_limit integer DEFAULT 1000,
    p_jobs bigint[] DEFAULT NULL,
    p_grace interval DEFAULT NULL,
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
    v_futures bigint[];
    v_jobs bigint[];
BEGIN
    IF p_limit IS NULL OR p_limit < 1 THEN
        RAISE EXCEPTION 'p_limit: must be at least 1, got %', p_limit USING ERRCODE = 'invalid_parameter_value';
    END IF;

    -- 1. Due futures, lowest priority first, oldest first within a priority (rows are only
    --    read and locked as far as the batch needs), and their jobs, locked so that one poller
    --    at a time decides for a job (a job busy elsewhere is passed over until the next call).
    --    Everyone who changes a job's definition or statistics holds this lock.
    WITH
    -- The priorities that have ready futures (a loose index scan, one probe per value).
    prio(p) AS (SELECT r.p FROM cronbox.ready_priorities() AS r(p)),
    picked AS MATERIALIZED (
        SELECT x.*
        FROM prio CROSS JOIN LATERAL (
            SELECT f.future_id, f.job_id
            FROM cronbox.job_future f
            WHERE f.hold IS NULL AND f.priority = prio.p AND f.due_at <= p_now
              AND (p_jobs IS NULL OR f.job_id = ANY (p_jobs))
              -- The job's lock (its job_stat row: cronbox.lock_job_id), taken in the walk, so a
              -- future whose job is busy elsewhere (a bulk pause or resume, a saturation pass)
              -- is passed over and does not count against p_limit: thousands of locked jobs
              -- due first never fill the batch ahead of another queue's due fire. A probe by
              -- key per future walked (a sub-SELECT with a lock is never turned into a join).
              AND EXISTS (SELECT 1 FROM cronbox.job_stat s WHERE s.job_id = f.job_id
                          FOR NO KEY UPDATE SKIP LOCKED)
            ORDER BY f.due_at
            LIMIT p_limit
            FOR UPDATE OF f SKIP LOCKED
        ) x
        LIMIT p_limit
    )
    SELECT array_agg(p.future_id), array_agg(DISTINCT p.job_id)
      INTO v_futures, v_jobs
    FROM picked p;
    IF v_futures IS NULL THEN
        RETURN QUERY SELECT 0, 0, 0, 0, cronbox.next_due();
        RETURN;
    END IF;

    -- 2. Decide and write (cronbox.dispatch_locked, shared with early dispatch), in a new
    --    statement whose snapshot is taken with the locks held.
    RETURN QUERY
    SELECT d.dispatched, d.skipped, d.failed, d.held, cronbox.next_due()
    FROM cronbox.dispatch_locked(v_futures, v_jobs, p_grace, p_now) d;
    -- 3. A job whose last scheduled fire was just decided has finished: the change log says so
    --    now, not when saturation found nothing left to schedule (cronbox.record_finished).
    PERFORM cronbox.record_finished(v_jobs, p_now);
END
$$;

COMMENT ON FUNCTION cronbox.dispatch_at(integer, bigint[], interval, timestamp with time zone) IS
'Internal (no cronbox role may execute it): the body of cronbox.dispatch(integer, bigint[], interval) with the time as p_now; tests use it to fix the clock. Poller: decides for up to p_limit due ready futures, lower priority first (paused -> held; dependency gate; overlap policy; queue limit) and writes run + outbox rows, skipped/failed runs or holds, in one statement (SKIP LOCKED; safe with many pollers). p_jobs restricts it to those jobs; with p_grace, late scheduled fires superseded by a newer due fire of their job are recorded missed (catch-up), not skipped. Returns the counts and the next due time.';

ALTER FUNCTION cronbox.dispatch_at(integer, bigint[], interval, timestamp with time zone) OWNER TO cronbox_owner;
REVOKE ALL ON FUNCTION cronbox.dispatch_at(integer, bigint[], interval, timestamp with time zone) FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
