-- cronbox.dispatch(p_limit): decides, in one statement, what happens to up to p_limit
-- due ready futures, shared between the queues with due work (each up to its share, lower
-- priority first, oldest first), and writes it: run + outbox row (dispatched), a
-- skipped or failed run row, or a hold on the future. One transaction: a fire is dispatched
-- exactly once whatever crashes. Locks, in the walk of job_future_lane_idx (queue by queue, priority by
-- priority): each future's job FOR NO KEY UPDATE SKIP LOCKED, then the future FOR UPDATE SKIP
-- LOCKED (a future whose job is busy elsewhere is passed over, not counted in p_limit), then
-- the queue_limit rows concerned. Any number of pollers may call it.
-- Thin wrapper: the body is cronbox.dispatch_at (internal/dispatch_at.sql), called with now().
-- p_jobs: only futures of these jobs (the poller isolating a job that makes a batch fail).
-- p_grace: a scheduled fire due more than p_grace ago with a newer fire of its job in the same
-- batch was missed (the poller was down or behind): recorded 'missed' unless catchup = 'all',
-- never 'overlap: skipped'. NULL: no such check.
-- p_bucket: only that bucket's futures (a poller leasing buckets, or Citus delegating the call to
-- the node holding it: docs/citus.md); NULL: every bucket, one bucket after another where
-- job_future is distributed (cronbox.bucket_walks).
CREATE OR REPLACE FUNCTION cronbox.dispatch(
    p_limit integer DEFAULT 1000,
    p_jobs bigint[] DEFAULT NULL,
    p_grace interval DEFAULT NULL,
    p_bucket integer DEFAULT NULL
) RETURNS TABLE(dispatched integer, skipped integer, failed integer, held integer, next_due timestamp with time zone)
LANGUAGE sql VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off
AS $$
    SELECT * FROM cronbox.dispatch_at(cronbox.checked_limit('p_limit', $1, 100000), $2,
        cronbox.checked_interval('p_grace', $3, interval '0', interval '366 days', true), $4, now())
$$;

COMMENT ON FUNCTION cronbox.dispatch(integer, bigint[], interval, integer) IS
'Poller: decides for up to p_limit due ready futures, shared between the queues with due work (lower priority first within a queue; paused -> held; dependency gate; overlap policy; queue limit) and writes run + outbox rows, skipped/failed runs or holds, in one statement (SKIP LOCKED; safe with many pollers). p_jobs restricts it to those jobs; with p_grace, late scheduled fires superseded by a newer due fire of their job are recorded missed (catch-up), not skipped. With p_bucket, only that bucket''s futures (NULL: every bucket, in turn where job_future is distributed). Returns the counts and the next due time.';

ALTER FUNCTION cronbox.dispatch(integer, bigint[], interval, integer) OWNER TO cronbox_runner;
REVOKE ALL ON FUNCTION cronbox.dispatch(integer, bigint[], interval, integer) FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
GRANT EXECUTE ON FUNCTION cronbox.dispatch(integer, bigint[], interval, integer) TO cronbox_process;
