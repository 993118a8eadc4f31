-- Internal: the body of cronbox.dispatch_ahead, with the time as its last parameter p_now. The public
-- cronbox.dispatch_ahead passes now(); no cronbox role may execute this one (tests call it as the
-- owner or a superuser to fix the clock).
-- cronbox.dispatch_ahead_at(p_limit, p_lead, p_now): the poller's early dispatch (CRONBOX_DISPATCH_LEAD).
-- Writes run + outbox rows for up to p_limit ready futures due in (p_now, p_now + p_lead] whose
-- decision cannot change between now and their due time, so that the relay can hold the
-- messages and send them at the due time itself instead of starting a claim then:
--   * scheduled fires only (origin 'schedule': not trigger(), retries or after-jobs);
--   * of unpaused jobs with overlap 'allow' (no earlier run can change the decision), no
--     upstream dependency (add_dependency: the gate looks at upstream successes) and a queue
--     without a queue limit (slots are counted when taken).
-- Everything else waits for cronbox.dispatch at its due time. The outbox row is available at
-- the future's due time (claim_outbox(p_ahead) lets a relay take it up to p_ahead early and
-- hold it); the run is dispatched as of its due time. The price: a fire decided early has been
-- decided: pause(), unschedule() or an update withdraw early runs no relay holds yet
-- (cronbox.withdraw_early_runs), not those a relay holds (docs/runs.md, "Early dispatch").
-- Locks as dispatch: each candidate's job lock (its job_stat row FOR NO KEY UPDATE SKIP LOCKED)
-- taken while walking them (cronbox.early_candidates), a job busy elsewhere passed over; the
-- futures themselves are not locked (every writer of a job's futures holds the job's lock).
-- The write is dispatch's own (cronbox.dispatch_locked): one path for both.
CREATE OR REPLACE FUNCTION cronbox.dispatch_ahead_at(
    p_limit integer,
    p_lead interval,
    p_now timestamptz DEFAULT now()
) RETURNS TABLE (dispatched integer, busy integer, next_due timestamptz)
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off  -- short OLTP statements: compiling costs more than running
AS $$
DECLARE
    v_dispatched integer;
    v_picked integer;
    v_passed integer := 0;
    v_futures bigint[];
    v_jobs bigint[];
BEGIN
    IF p_limit IS NULL OR p_limit < 1 THEN
        RAISE EXCEPTION 'p_limit: must be at least 1, got %', p_limit USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_lead IS NULL THEN
        RAISE EXCEPTION 'p_lead: must not be NULL' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    IF p_lead < interval '0' OR p_lead > interval '1 hour' THEN
        RAISE EXCEPTION 'p_lead: must be between 0 and 1 hour, got %', p_lead USING ERRCODE = 'invalid_parameter_value';
    END IF;

    -- 1. Eligible ready futures due within the lead, lowest priority first, each with its
    --    job's lock (one primary-key probe per candidate in due order; OFFSET 0 keeps the
    --    probe inside the walk), a future whose job is busy elsewhere passed over, as is one
    --    whose job's row changed since this statement's snapshot (another poller dispatched
    --    it meanwhile: its futures are gone), as in cronbox.dispatch_at.
    WITH picked AS MATERIALIZED (
        SELECT c.future_id, c.job_id
        -- no limit per priority: the walk goes on past the futures of jobs busy elsewhere
        -- (another poller's batch) until this LIMIT has its p_limit
        FROM cronbox.early_candidates(p_lead, p_now, NULL) c
        CROSS JOIN LATERAL (SELECT s.job_id FROM cronbox.job_stat s
                            WHERE s.job_id = c.job_id
                              AND s.xmin = (SELECT s0.xmin FROM cronbox.job_stat s0 WHERE s0.job_id = c.job_id)
                            OFFSET 0) mine
        LIMIT p_limit
        FOR NO KEY UPDATE OF mine SKIP LOCKED
    )
    SELECT count(*)::integer, array_agg(p.future_id), array_agg(DISTINCT p.job_id)
      INTO v_picked, v_futures, v_jobs
    FROM picked p;
    -- Passed over because their job was busy elsewhere (a saturation pass, a report): worth
    -- another try soon, before they are due. Only a short batch walked the whole lead.
    IF v_picked < p_limit THEN
        SELECT count(*)::integer INTO v_passed
        FROM (SELECT 1 FROM cronbox.early_candidates(p_lead, p_now, p_limit - v_picked) c
              WHERE NOT (c.job_id = ANY (coalesce(v_jobs, '{}')))
              LIMIT p_limit - v_picked) x;
    END IF;

    -- 2. Still eligible, read under the locks (a pause or an update that committed before them
    --    is seen here; one after them waits for this transaction).
    IF v_jobs IS NOT NULL THEN
        SELECT array_agg(j.job_id) INTO v_jobs
        FROM cronbox.job j
        WHERE j.job_id = ANY (v_jobs) AND j.overlap = 'allow' AND NOT j.paused
          AND NOT EXISTS (SELECT 1 FROM cronbox.job_dependency d WHERE d.job_id = j.job_id);
        SELECT array_agg(f.future_id) INTO v_futures
        FROM cronbox.job_future f
        WHERE f.future_id = ANY (v_futures) AND f.job_id = ANY (v_jobs);
    END IF;

    -- 3. The same write as dispatch (cronbox.dispatch_locked): every eligible fire is a run,
    --    dispatched as of its due time and available to the relays then.
    v_dispatched := 0;
    IF v_futures IS NOT NULL THEN
        SELECT d.dispatched INTO v_dispatched
        FROM cronbox.dispatch_locked(v_futures, v_jobs, NULL, p_now) d;
    END IF;
    -- busy: eligible fires whose job was locked elsewhere (a saturation pass, a worker's report),
    -- or that a change under the lock made ineligible: worth another try soon, before they are due.
    RETURN QUERY SELECT v_dispatched, v_passed + v_picked - v_dispatched, cronbox.next_due();
END
$$;

COMMENT ON FUNCTION cronbox.dispatch_ahead_at(integer, interval, timestamp with time zone) IS
'Internal (no cronbox role may execute it): the body of cronbox.dispatch_ahead(integer, interval) with the time as p_now; tests use it to fix the clock. Poller (CRONBOX_DISPATCH_LEAD): writes run + outbox rows, available at their due time, for up to p_limit scheduled fires due within p_lead of jobs whose decision cannot change before then (overlap allow, unpaused, no dependency, no queue limit). Returns the count, the eligible fires skipped because their job was locked elsewhere (busy), and the next due time.';

ALTER FUNCTION cronbox.dispatch_ahead_at(integer, interval, timestamp with time zone) OWNER TO cronbox_owner;
REVOKE ALL ON FUNCTION cronbox.dispatch_ahead_at(integer, interval, timestamp with time zone) FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
