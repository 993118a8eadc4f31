-- cronbox.claim_saturation(p_limit, p_horizon, p_now): locks up to p_limit active jobs whose
-- next fire falls inside the horizon (p_now + p_horizon) and returns what the poller needs to
-- compute their fires. FOR UPDATE SKIP LOCKED on job_saturate_idx: concurrent pollers get
-- disjoint jobs and an idle tick reads no row. Call it, then cronbox.store_fires, in one
-- transaction: the row locks make schedule()/pause() wait for the pair to commit.
CREATE OR REPLACE FUNCTION cronbox.claim_saturation(
    p_limit integer,
    p_horizon interval,
    p_now timestamptz DEFAULT now()
) RETURNS TABLE (
    job_id bigint, kind text, cron_normalized text, every interval, anchor timestamptz,
    at timestamptz, timezone text, frontier timestamptz, catchup text,
    catchup_window interval, starts_at timestamptz, ends_at timestamptz, now timestamptz
)
LANGUAGE sql
SET search_path = pg_catalog, pg_temp
AS $$
    WITH picked AS (
        SELECT j.job_id
        FROM cronbox.job j
        WHERE j.next_fire IS NOT NULL AND NOT j.paused
          AND j.next_fire <= p_now + p_horizon
        ORDER BY j.next_fire
        LIMIT p_limit
        FOR UPDATE SKIP LOCKED
    )
    SELECT j.job_id, j.kind, j.cron_normalized, j.every, j.anchor, j.at, j.timezone,
           j.frontier, j.catchup, j.catchup_window, j.starts_at, j.ends_at, p_now
    FROM picked p JOIN cronbox.job j ON j.job_id = p.job_id
$$;

COMMENT ON FUNCTION cronbox.claim_saturation(integer, interval, timestamptz) IS
'Poller: locks (SKIP LOCKED) up to p_limit unpaused jobs whose next fire is within p_now + p_horizon and returns their schedule; follow with cronbox.store_fires in the same transaction.';
