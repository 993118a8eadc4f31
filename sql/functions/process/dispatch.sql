-- cronbox.dispatch(p_limit): decides, in one statement, what happens to up to p_limit
-- due ready futures, lower priority first, and writes it: run + outbox row (dispatched), a
-- skipped or failed run row, or a hold on the future. One transaction: a fire is dispatched
-- exactly once whatever crashes. Locks: futures FOR UPDATE SKIP LOCKED (job_future_ready_idx,
-- walked priority by priority), their jobs FOR NO KEY UPDATE SKIP LOCKED (a job busy elsewhere
-- waits for the next call), then the queue_limit rows concerned. Any number of pollers may call it.
-- Thin wrapper: the body is cronbox.dispatch_at (internal/dispatch_at.sql), called with now().
CREATE OR REPLACE FUNCTION cronbox.dispatch(
    p_limit integer DEFAULT 1000
) RETURNS TABLE(dispatched integer, skipped integer, failed integer, held integer, next_due timestamp with time zone)
LANGUAGE sql VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off
AS $$
    SELECT * FROM cronbox.dispatch_at(cronbox.checked_limit('p_limit', $1, 100000), now())
$$;

COMMENT ON FUNCTION cronbox.dispatch(integer) IS
'Poller: decides for up to p_limit due ready futures, lower priority first (paused -> held; dependency gate; overlap policy; queue limit) and writes run + outbox rows, skipped/failed runs or holds, in one statement (SKIP LOCKED; safe with many pollers). Returns the counts and the next due time.';

ALTER FUNCTION cronbox.dispatch(integer) OWNER TO cronbox_owner;
REVOKE ALL ON FUNCTION cronbox.dispatch(integer) FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
GRANT EXECUTE ON FUNCTION cronbox.dispatch(integer) TO cronbox_process;
