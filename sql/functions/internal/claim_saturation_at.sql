-- Internal: the body of cronbox.claim_saturation, with the time as its last parameter p_now. The public
-- cronbox.claim_saturation passes now(); no cronbox role may execute this one (tests call it as the
-- owner or a superuser to fix the clock).
-- cronbox.claim_saturation_at(p_limit, p_horizon, p_bucket, p_now): takes the job's lock
-- (cronbox.lock_job_id: its job_stat row, SKIP LOCKED) of up to p_limit unpaused jobs that have
-- less than half the horizon materialised (cronbox.job_fire: next_fire <= p_now + p_horizon/2), refills
-- about to run out first, then new and due jobs, then early refills, then those catching up from
-- further back than a horizon, and returns what the poller
-- needs to compute their fires up to p_now + p_horizon. Concurrent pollers get disjoint jobs,
-- dispatch and every writer of a job skip or wait for them meanwhile, and an idle tick reads
-- no row. Two statements: the walk on job_saturate_idx takes the locks; the rows are then
-- read by a second statement, so they are the versions committed before the lock was taken
-- (a definition change that held the lock is seen; a job no longer due is left out). The job
-- row itself is not locked (the job's lock orders its writers); the pass updates its narrow
-- job_fire row once, and the job row only when the job finishes or breaks.
-- Call cronbox.store_fires in the same transaction: schedule()/pause() wait for the pair to commit.
-- catchup_from (catchup => 'all' only, NULL otherwise): start of the catch-up window
-- (cronbox.catchup_start), computed here so the
-- poller and schedule() count months and days by one rule.
-- By bucket (docs/citus.md, "Saturation, bucket by bucket"): p_bucket claims that bucket's jobs
-- only; NULL visits the bucket sets of cronbox.bucket_walks('cronbox.job_fire') in turn from a
-- random one until p_limit jobs are claimed (plain PostgreSQL: one set, {0}, one pass); each
-- row says its job's bucket, which the poller passes to cronbox.store_fires.
CREATE OR REPLACE FUNCTION cronbox.claim_saturation_at(
    p_limit integer,
    p_horizon interval,
    p_bucket integer DEFAULT NULL,
    p_now timestamptz DEFAULT now()
) RETURNS TABLE (
    job_id bigint, kind text, cron_normalized text, every interval, every_mode text,
    anchor timestamptz, at timestamptz, timezone text, frontier timestamptz, catchup text,
    catchup_window interval, starts_at timestamptz, ends_at timestamptz, now timestamptz,
    catchup_from timestamptz, bucket integer
)
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET enable_bitmapscan = off  -- an ordered walk up to the limit, never all rows gathered and sorted: SQL conventions
SET jit = off  -- short OLTP statements: compiling costs more than running
AS $$
DECLARE
    v_ids bigint[];
    v_set integer[];    -- the bucket set walked (cronbox.bucket_walks_in_turn), two statements each
    v_taken integer := 0;
BEGIN
    FOREACH v_set SLICE 1 IN ARRAY cronbox.bucket_walks_in_turn('cronbox.job_fire', p_bucket) LOOP
        EXIT WHEN v_taken >= p_limit;
        -- Four walks in next_fire order on job_saturate_idx, each taking the job's lock as it goes
        -- (a job whose lock is held elsewhere is passed over, not waited for), in this order:
        -- 1. refills that are due: futures left for at most a quarter of the horizon. Their next
        --    fire is exact and ahead: a job that is running keeps running whatever else waits
        --    (a million new schedules have older next fires: the lower bound schedule() writes,
        --    their creation time; by that order alone they went first and an every-second job's
        --    futures ran out);
        -- 2. jobs whose next fire is at most a horizon old: new jobs, fires already due;
        -- 3. the other refills (up to half the horizon ahead): taken early when there is time;
        -- 4. jobs catching up from further back than a horizon: a thousand year-long catch-ups
        --    never keep another job from its refill.
        v_ids := ARRAY(
            SELECT c.job_id FROM (
                (SELECT jf.job_id
                 FROM cronbox.job_fire jf
                 CROSS JOIN LATERAL (SELECT FROM cronbox.job_stat s WHERE s.bucket = ANY (v_set) AND s.job_id = jf.job_id
                                     FOR NO KEY UPDATE OF s SKIP LOCKED) l
                 WHERE jf.next_fire IS NOT NULL AND NOT jf.paused AND jf.bucket = ANY (v_set)
                   AND jf.next_fire > p_now AND jf.next_fire <= p_now + p_horizon / 4
                 ORDER BY jf.next_fire
                 LIMIT p_limit - v_taken)
                UNION ALL
                (SELECT jf.job_id
                 FROM cronbox.job_fire jf
                 CROSS JOIN LATERAL (SELECT FROM cronbox.job_stat s WHERE s.bucket = ANY (v_set) AND s.job_id = jf.job_id
                                     FOR NO KEY UPDATE OF s SKIP LOCKED) l
                 WHERE jf.next_fire IS NOT NULL AND NOT jf.paused AND jf.bucket = ANY (v_set)
                   AND jf.next_fire >= p_now - p_horizon AND jf.next_fire <= p_now
                 ORDER BY jf.next_fire
                 LIMIT p_limit - v_taken)
                UNION ALL
                (SELECT jf.job_id
                 FROM cronbox.job_fire jf
                 CROSS JOIN LATERAL (SELECT FROM cronbox.job_stat s WHERE s.bucket = ANY (v_set) AND s.job_id = jf.job_id
                                     FOR NO KEY UPDATE OF s SKIP LOCKED) l
                 WHERE jf.next_fire IS NOT NULL AND NOT jf.paused AND jf.bucket = ANY (v_set)
                   AND jf.next_fire > p_now + p_horizon / 4 AND jf.next_fire <= p_now + p_horizon / 2
                 ORDER BY jf.next_fire
                 LIMIT p_limit - v_taken)
                UNION ALL
                (SELECT jf.job_id
                 FROM cronbox.job_fire jf
                 CROSS JOIN LATERAL (SELECT FROM cronbox.job_stat s WHERE s.bucket = ANY (v_set) AND s.job_id = jf.job_id
                                     FOR NO KEY UPDATE OF s SKIP LOCKED) l
                 WHERE jf.next_fire IS NOT NULL AND NOT jf.paused AND jf.bucket = ANY (v_set)
                   AND jf.next_fire < p_now - p_horizon
                 ORDER BY jf.next_fire
                 LIMIT p_limit - v_taken)
                LIMIT p_limit - v_taken) c);
        CONTINUE WHEN cardinality(v_ids) = 0;
        v_taken := v_taken + cardinality(v_ids);
        -- the rows as committed now that their locks are held, in the walk's order; a job changed
        -- meanwhile so that it is no longer due (paused, refilled by another poller) is left out
        RETURN QUERY
        SELECT j.job_id, j.kind, j.cron_normalized, j.every, j.every_mode, j.anchor, j.at,
               j.timezone, f.frontier, j.catchup, j.catchup_window, j.starts_at, j.ends_at, p_now,
               -- (the window's start matters only to catchup => 'all')
               CASE WHEN j.catchup = 'all' THEN cronbox.catchup_start(p_now, j.catchup_window) END, j.bucket
        FROM unnest(v_ids) WITH ORDINALITY AS c(job_id, i)
        -- one probe by key per job (docs/architecture.md, SQL conventions)
        CROSS JOIN LATERAL (SELECT f.frontier, f.next_fire, f.paused
                            FROM cronbox.job_fire f WHERE f.bucket = ANY (v_set) AND f.job_id = c.job_id LIMIT 1) f
        CROSS JOIN LATERAL (SELECT j.job_id, j.kind, j.cron_normalized, j.every, j.every_mode, j.anchor, j.at,
                                   j.timezone, j.catchup, j.catchup_window, j.starts_at, j.ends_at, j.bucket
                            FROM cronbox.job j WHERE j.bucket = ANY (v_set) AND j.job_id = c.job_id LIMIT 1) j
        WHERE f.next_fire IS NOT NULL AND NOT f.paused AND f.next_fire <= p_now + p_horizon / 2
        ORDER BY c.i;
    END LOOP;
END
$$;

COMMENT ON FUNCTION cronbox.claim_saturation_at(integer, interval, integer, timestamp with time zone) IS
'Internal (no cronbox role may execute it): the body of cronbox.claim_saturation(integer, interval, integer) with the time as p_now; tests use it to fix the clock. Poller: locks (SKIP LOCKED, job_saturate_idx) up to p_limit unpaused jobs with less than half of p_horizon materialised and returns their schedules with their buckets (p_bucket: that bucket only; NULL: bucket by bucket, one pass on plain PostgreSQL); follow with cronbox.store_fires per bucket in the same transaction.';

ALTER FUNCTION cronbox.claim_saturation_at(integer, interval, integer, timestamp with time zone) OWNER TO cronbox_owner;
REVOKE ALL ON FUNCTION cronbox.claim_saturation_at(integer, interval, integer, timestamp with time zone) FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
