-- cronbox.ack_outbox(p_owner, p_ids, p_outcomes, p_now): the relay's second transaction.
-- Deletes the delivered rows still leased to p_owner (a lease that ran out and was taken by
-- another relay is that relay's to ack) and moves their runs dispatched -> delivered with a
-- lease of the run's timeout, in one statement. p_outcomes (optional, a JSON array of
-- {outbox_id, state: succeeded|failed, result, error, retryable}) completes runs in the same
-- transaction through cronbox.complete_run / cronbox.fail_run, only for rows acked here, so
-- repeating an ack whose commit was lost changes nothing. Returns the number of rows acked.
CREATE OR REPLACE FUNCTION cronbox.ack_outbox(
    p_owner text,
    p_ids bigint[],
    p_outcomes jsonb DEFAULT NULL,
    p_now timestamptz DEFAULT now()
) RETURNS integer
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_acked integer;
    v_outbox bigint[];
    v_runs bigint[];
BEGIN
    WITH acked AS (
        DELETE FROM cronbox.outbox o
        WHERE o.outbox_id = ANY (p_ids) AND o.lease_owner = p_owner
        RETURNING o.outbox_id, o.run_id, o.timeout
    ),
    delivered AS (
        UPDATE cronbox.run r SET
            state = 'delivered',
            delivered_at = p_now,
            lease_until = p_now + a.timeout
        FROM acked a
        WHERE r.run_id = a.run_id AND r.state = 'dispatched'
    )
    SELECT count(*)::integer,
           array_agg(a.outbox_id) FILTER (WHERE a.run_id IS NOT NULL AND p_outcomes IS NOT NULL),
           array_agg(a.run_id) FILTER (WHERE a.run_id IS NOT NULL AND p_outcomes IS NOT NULL)
      INTO v_acked, v_outbox, v_runs
    FROM acked a;

    IF v_outbox IS NOT NULL THEN
        -- The worker answered with the run's outcome: record it with the worker-side semantics.
        PERFORM CASE WHEN oc.state = 'succeeded'
                     THEN cronbox.complete_run(a.run_id, oc.result, p_now)
                     ELSE cronbox.fail_run(a.run_id, coalesce(oc.error, 'failed (no error given)'),
                                           coalesce(oc.retryable, true), p_now) END
        FROM unnest(v_outbox, v_runs) AS a(outbox_id, run_id)
        JOIN jsonb_to_recordset(p_outcomes)
             AS oc(outbox_id bigint, state text, result jsonb, error text, retryable boolean)
          ON oc.outbox_id = a.outbox_id
        WHERE oc.state IN ('succeeded', 'failed')
        ORDER BY a.run_id;
    END IF;
    RETURN v_acked;
END
$$;

COMMENT ON FUNCTION cronbox.ack_outbox(text, bigint[], jsonb, timestamptz) IS
'Relay: deletes delivered outbox rows still leased to p_owner and marks their runs delivered (lease = run timeout); optional p_outcomes (JSON array of {outbox_id, state, result, error, retryable}) completes or fails those runs in the same transaction. Returns the count acked.';
