-- Internal: the body of cronbox.claim_backfills, with the time as its last parameter p_now. The public
-- cronbox.claim_backfills passes now(); no cronbox role may execute this one (tests call it as the
-- owner or a superuser to fix the clock).
-- cronbox.claim_backfills_at(p_limit, p_bucket, p_now): the first half of a backfill pass. Locks up to
-- p_limit pending backfill requests (backfill_pending_idx, FOR UPDATE SKIP LOCKED: pollers get
-- disjoint requests), their jobs' locks (job_stat rows, cronbox.lock_job_id) and job rows
-- (both FOR NO KEY UPDATE SKIP LOCKED: a job being saturated, dispatched, finished or changed
-- right now is left for the next pass, so the reaper round never waits on a lock; saturation,
-- dispatch and writers of a locked job wait for this pass or skip it), and returns what
-- the poller needs to compute the fires with the saturation code, with each request's bucket.
-- By bucket (docs/citus.md): p_bucket claims that bucket's requests only; NULL visits the bucket
-- sets of cronbox.bucket_walks('cronbox.backfill') in turn from a random one until p_limit
-- requests are claimed (plain PostgreSQL: one set, {0}, one statement). Every table of the
-- statement is filtered on the bucket set: one task where they are distributed.
CREATE OR REPLACE FUNCTION cronbox.claim_backfills_at(
    p_limit integer DEFAULT 10,
    p_bucket integer DEFAULT NULL,
    p_now timestamptz DEFAULT now()
) RETURNS TABLE (
    backfill_id bigint, job_id bigint, kind text, cron_normalized text, every interval,
    every_mode text, anchor timestamptz, at timestamptz, timezone text, starts_at timestamptz,
    ends_at timestamptz, frontier timestamptz, from_at timestamptz, to_at timestamptz,
    done_through timestamptz, fires_left integer, now timestamptz, bucket integer
)
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_set integer[];    -- the bucket set walked (cronbox.bucket_walks_in_turn), one statement each
    v_taken integer := 0;
    v_got integer;
BEGIN
    FOREACH v_set SLICE 1 IN ARRAY cronbox.bucket_walks_in_turn('cronbox.backfill', p_bucket) LOOP
        EXIT WHEN v_taken >= p_limit;
        -- The caller's next statement (store_backfill) takes a new snapshot, which holds whatever
        -- saturation or dispatch of these jobs committed before this lock.
        RETURN QUERY
        SELECT b.backfill_id, j.job_id, j.kind, j.cron_normalized, j.every, j.every_mode, j.anchor,
               j.at, j.timezone, j.starts_at, j.ends_at, f.frontier, b.from_at, b.to_at,
               b.done_through, 1000 - b.fires - b.duplicates, p_now, b.bucket
        FROM cronbox.backfill b
        JOIN cronbox.job j ON j.bucket = ANY (v_set) AND j.job_id = b.job_id
        JOIN cronbox.job_stat s ON s.bucket = ANY (v_set) AND s.job_id = b.job_id
        JOIN cronbox.job_fire f ON f.bucket = ANY (v_set) AND f.job_id = b.job_id  -- (read under the job's lock, which orders its writers)
        WHERE b.done_at IS NULL AND b.bucket = ANY (v_set)
        ORDER BY b.backfill_id
        LIMIT p_limit - v_taken
        FOR UPDATE OF b SKIP LOCKED
        FOR NO KEY UPDATE OF j, s SKIP LOCKED;
        GET DIAGNOSTICS v_got = ROW_COUNT;
        v_taken := v_taken + v_got;
    END LOOP;
END
$$;

COMMENT ON FUNCTION cronbox.claim_backfills_at(integer, integer, timestamp with time zone) IS
'Internal (no cronbox role may execute it): the body of cronbox.claim_backfills(integer, integer) with the time as p_now; tests use it to fix the clock. Poller: locks up to p_limit pending backfill requests (SKIP LOCKED) and their jobs and returns the schedules, frontiers, ranges, progress and buckets to compute their fires (p_bucket: that bucket only; NULL: bucket by bucket, one statement on plain PostgreSQL); follow with cronbox.store_backfill per bucket in the same transaction.';

ALTER FUNCTION cronbox.claim_backfills_at(integer, integer, timestamp with time zone) OWNER TO cronbox_owner;
REVOKE ALL ON FUNCTION cronbox.claim_backfills_at(integer, integer, timestamp with time zone) FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
