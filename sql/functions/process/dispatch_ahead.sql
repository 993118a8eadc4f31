-- cronbox.dispatch_ahead(p_limit, p_lead): the poller's early dispatch (CRONBOX_DISPATCH_LEAD).
-- Writes run + outbox rows for up to p_limit ready futures due in (now(), now() + p_lead] whose
-- decision cannot change between now and their due time, so that the relay can hold the
-- messages and send them at the due time itself instead of starting a claim then:
--   * scheduled fires only (origin 'schedule': not trigger(), retries or after-jobs);
--   * of unpaused jobs with overlap 'allow' (no earlier run can change the decision), no
--     upstream dependency (add_dependency: the gate looks at upstream successes) and a queue
--     without a queue limit (slots are counted when taken);
--   * with p_lead longer than 1 second (a burst's), also a 'skip' job's first fire when no run of
--     the job is unfinished: marked on job_stat (early_due_at, the statistics before it) so that
--     whatever makes another run of the job unfinished first takes it back without a trace
--     (cronbox.withdraw_early_skip_runs), and claimable only from its due time (claim_at_due).
-- Everything else waits for cronbox.dispatch at its due time. The outbox row is available at
-- the future's due time (claim_outbox(p_ahead) lets a relay take it up to p_ahead early and
-- hold it); the run is dispatched as of its due time. The price: a fire decided early has been
-- decided: pause(), unschedule() or an update withdraw early runs no relay holds yet
-- (cronbox.withdraw_early_runs), not those a relay holds (docs/runs.md, "Early dispatch").
-- Locks as dispatch: futures FOR UPDATE SKIP LOCKED, then their jobs FOR NO KEY UPDATE SKIP
-- LOCKED.
-- p_walked_to, p_walked_id: what the last call returned as walked_to, walked_id; the walk then
-- reads, of the futures due up to p_walked_to, only those written since (future_id >
-- p_walked_id), so a fire early dispatch cannot take is read once, not by every call. NULL
-- (either): the whole lead is walked. Any value is safe: a fire the walk passes over is
-- dispatched at its due time, as without early dispatch.
-- Thin wrapper: the body is cronbox.dispatch_ahead_at (internal/dispatch_ahead_at.sql), called with now().
CREATE OR REPLACE FUNCTION cronbox.dispatch_ahead(
    p_limit integer,
    p_lead interval,
    p_bucket integer DEFAULT NULL,
    p_walked_to timestamptz DEFAULT NULL,
    p_walked_id bigint DEFAULT NULL
) RETURNS TABLE(dispatched integer, busy integer, next_due timestamp with time zone,
                walked_to timestamp with time zone, walked_id bigint)
LANGUAGE sql VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off
AS $$
    SELECT * FROM cronbox.dispatch_ahead_at(cronbox.checked_limit('p_limit', $1, 100000), $2, $3, $4, $5, now())
$$;

COMMENT ON FUNCTION cronbox.dispatch_ahead(integer, interval, integer, timestamp with time zone, bigint) IS
'Poller (CRONBOX_DISPATCH_LEAD): writes run + outbox rows, available at their due time, for up to p_limit scheduled fires due within p_lead of jobs whose decision cannot change before then (overlap allow, or with p_lead over 1 second a skip job''s first fire with no run unfinished, claimable only from its due time; unpaused, no dependency, no queue limit). Returns the count, the eligible fires skipped because their job was locked elsewhere (busy), the next due time, and where the next call may resume its walk (walked_to, walked_id: pass them back as p_walked_to, p_walked_id; NULL unless everything within the lead was examined). With p_bucket, only that bucket''s futures (NULL: every bucket, in turn where job_future is distributed).';

ALTER FUNCTION cronbox.dispatch_ahead(integer, interval, integer, timestamp with time zone, bigint) OWNER TO cronbox_owner;
REVOKE ALL ON FUNCTION cronbox.dispatch_ahead(integer, interval, integer, timestamp with time zone, bigint) FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
GRANT EXECUTE ON FUNCTION cronbox.dispatch_ahead(integer, interval, integer, timestamp with time zone, bigint) TO cronbox_process;
