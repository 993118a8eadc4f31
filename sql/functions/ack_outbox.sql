-- cronbox.ack_outbox(p_owner, p_ids, p_now): the relay's second transaction. Deletes the
-- delivered rows (only those still leased to p_owner: a lease that ran out and was taken by
-- another relay is that relay's to ack) and moves their runs dispatched -> delivered with a
-- lease of the job's timeout. Returns the number of rows acked.
CREATE OR REPLACE FUNCTION cronbox.ack_outbox(
    p_owner text,
    p_ids bigint[],
    p_now timestamptz DEFAULT now()
) RETURNS integer
LANGUAGE sql
SET search_path = pg_catalog, pg_temp
AS $$
    WITH acked AS (
        DELETE FROM cronbox.outbox o
        WHERE o.outbox_id = ANY (p_ids) AND o.lease_owner = p_owner
        RETURNING o.run_id, o.timeout
    ),
    delivered AS (
        UPDATE cronbox.run r SET
            state = 'delivered',
            delivered_at = p_now,
            lease_until = p_now + a.timeout
        FROM acked a
        WHERE r.run_id = a.run_id AND r.state = 'dispatched'
    )
    SELECT count(*)::integer FROM acked
$$;

COMMENT ON FUNCTION cronbox.ack_outbox(text, bigint[], timestamptz) IS
'Relay: deletes delivered outbox rows still leased to p_owner and marks their runs delivered (lease = job timeout). Returns the count.';
