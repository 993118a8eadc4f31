-- Internal: the body of cronbox.claim_saturation, with the time as its last parameter p_now. The public
-- cronbox.claim_saturation passes now(); no cronbox role may execute this one (tests call it as the
-- owner or a superuser to fix the clock).
-- cronbox.claim_saturation_at(p_limit, p_horizon, p_now): locks up to p_limit unpaused jobs that
-- have less than half the horizon materialised (next_fire <= p_now + p_horizon/2), current
-- jobs before those catching up from further back than a horizon, and returns what the poller
-- needs to compute their fires up to p_now + p_horizon. The job's lock
-- (cronbox.try_lock_job_id) and FOR UPDATE SKIP LOCKED on job_saturate_idx: concurrent pollers
-- get disjoint jobs, dispatch skips them meanwhile, and an idle tick reads no row.
-- The columns come from the locked row version itself, never from an older snapshot. Call
-- cronbox.store_fires in the same transaction: schedule()/pause() wait for the pair to commit.
-- catchup_from: start of the catch-up window (cronbox.catchup_start), computed here so the
-- poller and schedule() count months and days by one rule.
CREATE OR REPLACE FUNCTION cronbox.claim_saturation_at(
    p_limit integer,
    p_horizon interval,
    p_now timestamptz DEFAULT now()
) RETURNS TABLE (
    job_id bigint, kind text, cron_normalized text, every interval, every_mode text,
    anchor timestamptz, at timestamptz, timezone text, frontier timestamptz, catchup text,
    catchup_window interval, starts_at timestamptz, ends_at timestamptz, now timestamptz,
    catchup_from timestamptz
)
LANGUAGE sql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET enable_bitmapscan = off  -- an ordered walk up to the limit, never all rows gathered and sorted: SQL conventions
SET jit = off  -- short OLTP statements: compiling costs more than running
AS $$
    SELECT j.job_id, j.kind, j.cron_normalized, j.every, j.every_mode, j.anchor, j.at,
           j.timezone, j.frontier, j.catchup, j.catchup_window, j.starts_at, j.ends_at, p_now,
           cronbox.catchup_start(p_now, j.catchup_window)
    FROM (
        -- current jobs first (their next fire is at most a horizon old: a refill, a new job),
        -- then those catching up (older): a thousand year-long catch-ups never keep an
        -- every-second job from its refill; each walk in next_fire order on job_saturate_idx
        SELECT * FROM (
            SELECT j.*
            FROM cronbox.job j
            WHERE j.next_fire IS NOT NULL AND NOT j.paused
              AND j.next_fire >= p_now - p_horizon AND j.next_fire <= p_now + p_horizon / 2
            ORDER BY j.next_fire
            LIMIT p_limit
            FOR UPDATE SKIP LOCKED) current_jobs
        UNION ALL
        SELECT * FROM (
            SELECT j.*
            FROM cronbox.job j
            WHERE j.next_fire IS NOT NULL AND NOT j.paused
              AND j.next_fire < p_now - p_horizon
            ORDER BY j.next_fire
            LIMIT p_limit
            FOR UPDATE SKIP LOCKED) catching_up
        LIMIT p_limit
    ) j
    -- and the job's lock (cronbox.lock_job_id), only for the rows taken: a job whose lock is
    -- held elsewhere (dispatch, a report, a definition change) is left for the next pass
    WHERE cronbox.try_lock_job_id(j.job_id)
$$;

COMMENT ON FUNCTION cronbox.claim_saturation_at(integer, interval, timestamp with time zone) IS
'Internal (no cronbox role may execute it): the body of cronbox.claim_saturation(integer, interval) with the time as p_now; tests use it to fix the clock. Poller: locks (SKIP LOCKED, job_saturate_idx) up to p_limit unpaused jobs with less than half of p_horizon materialised and returns their schedules; follow with cronbox.store_fires in the same transaction.';

ALTER FUNCTION cronbox.claim_saturation_at(integer, interval, timestamp with time zone) OWNER TO cronbox_owner;
REVOKE ALL ON FUNCTION cronbox.claim_saturation_at(integer, interval, timestamp with time zone) FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
