-- cronbox.retry_backoff(delay, max_delay, attempt): how long to wait before retrying after
-- the given (1-based) attempt failed: delay * 2^(attempt-1), capped at max_delay, minus up to
-- 20% jitter (so retries of many jobs failing together spread out, and the cap is never
-- exceeded). Pure apart from random(); no locks.
CREATE OR REPLACE FUNCTION cronbox.retry_backoff(
    p_delay interval, p_max_delay interval, p_attempt integer
) RETURNS interval
LANGUAGE sql VOLATILE
SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT make_interval(secs =>
        least(extract(epoch FROM p_delay)::float8 * power(2::float8, least(greatest(p_attempt, 1) - 1, 60)),
              extract(epoch FROM p_max_delay)::float8)
        * (0.8 + 0.2 * random()))
$$;

COMMENT ON FUNCTION cronbox.retry_backoff(interval,interval,integer) IS
'Backoff before the retry that follows a failed attempt: delay * 2^(attempt-1), capped at max_delay, with up to 20% jitter below.';

ALTER FUNCTION cronbox.retry_backoff(interval,interval,integer) OWNER TO cronbox_owner;
REVOKE ALL ON FUNCTION cronbox.retry_backoff(interval,interval,integer) FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
