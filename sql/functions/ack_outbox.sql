-- cronbox.ack_outbox(p_owner, p_ids, p_outcomes, p_now): the relay's second transaction.
-- Deletes the delivered rows still leased to p_owner (a lease that ran out and was taken by
-- another relay is that relay's to ack) and moves their runs dispatched -> delivered with a
-- lease of the run's timeout. p_outcomes (optional, a JSON array of {outbox_id, state:
-- succeeded|failed, result, error, retryable}) finishes those runs instead, straight from
-- dispatched, set-based through cronbox.finish_runs (one call per kind, not per run), only
-- for rows acked here, so repeating an ack whose commit was lost changes nothing.
-- Returns the number of rows acked.
CREATE OR REPLACE FUNCTION cronbox.ack_outbox(
    p_owner text,
    p_ids bigint[],
    p_outcomes jsonb DEFAULT NULL,
    p_now timestamptz DEFAULT now()
) RETURNS integer
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
SET jit = off  -- short OLTP statements: compiling costs more than running
AS $$
DECLARE
    v_acked integer;
    v_ok bigint[];
    v_ok_results jsonb[];
    v_failed bigint[];
    v_errors text[];
    v_retryable boolean[];
BEGIN
    WITH acked AS (
        DELETE FROM cronbox.outbox o
        WHERE o.outbox_id = ANY (p_ids) AND o.lease_owner = p_owner
        RETURNING o.outbox_id, o.run_id, o.timeout
    ),
    -- The worker's answer, when it carried the run's outcome.
    outcome AS (
        SELECT oc.outbox_id, oc.state, oc.result, oc.error, oc.retryable
        FROM jsonb_to_recordset(coalesce(p_outcomes, '[]'))
             AS oc(outbox_id bigint, state text, result jsonb, error text, retryable boolean)
        WHERE oc.state IN ('succeeded', 'failed')
    ),
    settled AS (
        SELECT a.outbox_id, a.run_id, a.timeout, oc.state, oc.result, oc.error, oc.retryable
        FROM acked a LEFT JOIN outcome oc ON oc.outbox_id = a.outbox_id
    ),
    -- dispatched -> delivered only for runs whose outcome is still to come (one run-row
    -- write fewer for the others, which finish below straight from dispatched).
    delivered AS (
        UPDATE cronbox.run r SET
            state = 'delivered',
            delivered_at = p_now,
            lease_until = p_now + s.timeout
        FROM settled s
        WHERE r.run_id = ANY (ARRAY(SELECT x.run_id FROM settled x WHERE x.state IS NULL))
          AND r.run_id = s.run_id AND s.state IS NULL AND r.state = 'dispatched'
    )
    SELECT count(*)::integer,
           array_agg(s.run_id ORDER BY s.run_id) FILTER (WHERE s.run_id IS NOT NULL AND s.state = 'succeeded'),
           array_agg(s.result ORDER BY s.run_id) FILTER (WHERE s.run_id IS NOT NULL AND s.state = 'succeeded'),
           array_agg(s.run_id ORDER BY s.run_id) FILTER (WHERE s.run_id IS NOT NULL AND s.state = 'failed'),
           array_agg(coalesce(s.error, 'failed (no error given)') ORDER BY s.run_id)
               FILTER (WHERE s.run_id IS NOT NULL AND s.state = 'failed'),
           array_agg(coalesce(s.retryable, true) ORDER BY s.run_id)
               FILTER (WHERE s.run_id IS NOT NULL AND s.state = 'failed')
      INTO v_acked, v_ok, v_ok_results, v_failed, v_errors, v_retryable
    FROM settled s;

    -- Outcomes with the worker-side semantics, set-based: one call per kind, not per run.
    IF v_ok IS NOT NULL THEN
        PERFORM cronbox.finish_runs(v_ok, 'succeeded', v_ok_results, NULL, true, p_now);
    END IF;
    IF v_failed IS NOT NULL THEN
        PERFORM cronbox.finish_runs(
            array_agg(f.run_id ORDER BY f.run_id), 'failed', NULL,
            array_agg(f.error ORDER BY f.run_id), f.retryable, p_now)
        FROM unnest(v_failed, v_errors, v_retryable) AS f(run_id, error, retryable)
        GROUP BY f.retryable;
    END IF;
    RETURN v_acked;
END
$$;

COMMENT ON FUNCTION cronbox.ack_outbox(text, bigint[], jsonb, timestamptz) IS
'Relay: deletes delivered outbox rows still leased to p_owner and marks their runs delivered (lease = run timeout); optional p_outcomes (JSON array of {outbox_id, state, result, error, retryable}) completes or fails those runs in the same transaction. Returns the count acked.';
