-- cronbox.claim_saturation(p_limit, p_horizon, p_bucket): takes the job's lock (SKIP LOCKED) of up to
-- p_limit unpaused jobs that have less than half the horizon materialised (next_fire <= now() +
-- p_horizon/2), walking job_saturate_idx, and returns what the poller needs to compute their
-- fires up to now() + p_horizon: concurrent pollers get disjoint jobs, and an idle tick reads
-- no row. The rows are read once their locks are held, never from an older snapshot. Call
-- cronbox.store_fires in the same transaction: schedule()/pause() wait for the pair to commit.
-- p_bucket: that bucket's jobs only; NULL: bucket by bucket (plain PostgreSQL: its one bucket);
-- each row carries its job's bucket, for cronbox.store_fires (docs/citus.md).
-- Thin wrapper: the body is cronbox.claim_saturation_at (internal/claim_saturation_at.sql), called with now().
CREATE OR REPLACE FUNCTION cronbox.claim_saturation(
    p_limit integer,
    p_horizon interval,
    p_bucket integer DEFAULT NULL
) RETURNS TABLE(job_id bigint, kind text, cron_normalized text, every interval, every_mode text, anchor timestamp with time zone, at timestamp with time zone, timezone text, frontier timestamp with time zone, catchup text, catchup_window interval, starts_at timestamp with time zone, ends_at timestamp with time zone, now timestamp with time zone, catchup_from timestamp with time zone, bucket integer)
LANGUAGE sql VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off
AS $$
    SELECT * FROM cronbox.claim_saturation_at(cronbox.checked_limit('p_limit', $1, 100000),
                                              cronbox.checked_interval('p_horizon', $2, interval '1 second', interval '366 days'),
                                              $3, now())
$$;

COMMENT ON FUNCTION cronbox.claim_saturation(integer, interval, integer) IS
'Poller: locks (SKIP LOCKED, job_saturate_idx) up to p_limit unpaused jobs with less than half of p_horizon materialised and returns their schedules with their buckets (p_bucket: that bucket only; NULL: bucket by bucket, one pass on plain PostgreSQL); follow with cronbox.store_fires per bucket in the same transaction.';

ALTER FUNCTION cronbox.claim_saturation(integer, interval, integer) OWNER TO cronbox_owner;
REVOKE ALL ON FUNCTION cronbox.claim_saturation(integer, interval, integer) FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
GRANT EXECUTE ON FUNCTION cronbox.claim_saturation(integer, interval, integer) TO cronbox_process;
