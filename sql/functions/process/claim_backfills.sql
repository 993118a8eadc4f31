-- cronbox.claim_backfills(p_limit, p_bucket): the first half of a backfill pass. Locks up to p_limit
-- pending backfill requests (backfill_pending_idx, FOR UPDATE SKIP LOCKED: pollers get
-- disjoint requests) and their jobs (FOR NO KEY UPDATE SKIP LOCKED: a job being saturated,
-- dispatched or changed right now is left for the next pass), and returns what the poller needs to compute
-- the fires with the saturation code (the job's schedule, its frontier, the request's range,
-- progress and how many fires it may still make) and the request's bucket. p_bucket: that
-- bucket's requests only; NULL: bucket by bucket (plain PostgreSQL: its one bucket, one
-- statement). Call cronbox.store_backfill next, per bucket, in the same transaction.
-- Thin wrapper: the body is cronbox.claim_backfills_at (internal/claim_backfills_at.sql), called with now().
CREATE OR REPLACE FUNCTION cronbox.claim_backfills(
    p_limit integer DEFAULT 10,
    p_bucket integer DEFAULT NULL
) RETURNS TABLE(backfill_id bigint, job_id bigint, kind text, cron_normalized text, every interval, every_mode text, anchor timestamp with time zone, at timestamp with time zone, timezone text, starts_at timestamp with time zone, ends_at timestamp with time zone, frontier timestamp with time zone, from_at timestamp with time zone, to_at timestamp with time zone, done_through timestamp with time zone, fires_left integer, now timestamp with time zone, bucket integer)
LANGUAGE sql VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT * FROM cronbox.claim_backfills_at(cronbox.checked_limit('p_limit', $1, 1000), $2, now())
$$;

COMMENT ON FUNCTION cronbox.claim_backfills(integer, integer) IS
'Poller: locks up to p_limit pending backfill requests (SKIP LOCKED) and their jobs and returns the schedules, frontiers, ranges, progress and buckets to compute their fires (p_bucket: that bucket only; NULL: bucket by bucket, one statement on plain PostgreSQL); follow with cronbox.store_backfill per bucket in the same transaction.';

ALTER FUNCTION cronbox.claim_backfills(integer, integer) OWNER TO cronbox_owner;
REVOKE ALL ON FUNCTION cronbox.claim_backfills(integer, integer) FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
GRANT EXECUTE ON FUNCTION cronbox.claim_backfills(integer, integer) TO cronbox_process;
