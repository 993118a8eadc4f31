-- cronbox.dispatch(p_limit, p_now): moves up to p_limit due futures into run + outbox in
-- one statement (so one transaction): a fire is dispatched exactly once whatever crashes.
-- Locks the picked futures FOR UPDATE SKIP LOCKED (job_future_due_idx), so any number of
-- pollers may call it at once. Futures of paused jobs stay where they are.
-- Returns how many were dispatched and the next due time (the poller sleeps until then).
CREATE OR REPLACE FUNCTION cronbox.dispatch(
    p_limit integer DEFAULT 1000,
    p_now timestamptz DEFAULT now()
) RETURNS TABLE (dispatched integer, next_due timestamptz)
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_dispatched integer;
BEGIN
    WITH picked AS (
        SELECT f.future_id
        FROM cronbox.job_future f
        WHERE f.due_at <= p_now
          AND NOT EXISTS (SELECT 1 FROM cronbox.job j WHERE j.job_id = f.job_id AND j.paused)
        ORDER BY f.due_at, f.priority
        LIMIT p_limit
        FOR UPDATE SKIP LOCKED
    ),
    gone AS (
        DELETE FROM cronbox.job_future f USING picked p
        WHERE f.future_id = p.future_id
        RETURNING f.*
    ),
    fire AS (
        SELECT cronbox.new_run_id() AS run_id, g.job_id, j.name, j.queue, g.fire_at, g.due_at,
               g.attempt, g.origin, g.retry_of, coalesce(g.payload, j.payload) AS payload,
               g.priority, j.timeout
        FROM gone g JOIN cronbox.job j ON j.job_id = g.job_id
    ),
    new_run AS (
        INSERT INTO cronbox.run (run_id, job_id, job_name, queue, fire_at, due_at, state,
                                 attempt, origin, retry_of, payload, priority, created_at,
                                 dispatched_at)
        SELECT run_id, job_id, name, queue, fire_at, due_at, 'dispatched', attempt, origin,
               retry_of, payload, priority, p_now, p_now
        FROM fire
    ),
    new_message AS (
        INSERT INTO cronbox.outbox (run_id, queue, kind, message, timeout, created_at, available_at)
        SELECT run_id, queue, 'run',
               jsonb_build_object(
                   'run_id', run_id, 'job', name, 'queue', queue, 'payload', payload,
                   'fire_at', fire_at, 'attempt', attempt,
                   'idempotency_key', run_id::text || ':' || attempt::text),
               timeout, p_now, p_now
        FROM fire
    ),
    job_counts AS (
        UPDATE cronbox.job j SET
            active_runs = j.active_runs + c.n,
            last_fire_at = greatest(j.last_fire_at, c.last_fire),
            last_run_id = c.last_run,
            last_run_state = 'dispatched'
        FROM (SELECT job_id, count(*) AS n, max(fire_at) AS last_fire, max(run_id) AS last_run
              FROM fire GROUP BY job_id) c
        WHERE j.job_id = c.job_id
    )
    SELECT count(*) INTO v_dispatched FROM fire;

    IF v_dispatched > 0 THEN
        PERFORM pg_notify('cronbox_outbox', '');
    END IF;
    RETURN QUERY
        SELECT v_dispatched,
               (SELECT f.due_at FROM cronbox.job_future f ORDER BY f.due_at LIMIT 1);
END
$$;

COMMENT ON FUNCTION cronbox.dispatch(integer, timestamptz) IS
'Poller: moves up to p_limit due futures into cronbox.run + cronbox.outbox in one transaction (SKIP LOCKED; safe with many pollers). Returns the count and the next due time.';
