-- cronbox.withdraw_superseded_runs(p_run_ids, p_now): overlap 'cancel_other' asked these runs to
-- stop because a newer fire of their job was just dispatched. Those whose message is still
-- waiting in the outbox (no relay holds it: lease_until NULL or over) never reach a
-- worker: the message is deleted and the run ends 'cancelled' at once, through finish_runs
-- (their slots freed in the same transaction). A message a relay holds is not recalled: its
-- run keeps cancel_requested (start_run refuses it, heartbeat answers 'cancel'). Reads the
-- outbox through outbox_queue_idx (the runs' queues). Called by dispatch with the
-- jobs locked; returns the number withdrawn.
CREATE OR REPLACE FUNCTION cronbox.withdraw_superseded_runs(
    p_run_ids bigint[],
    p_now timestamptz DEFAULT now()
) RETURNS integer
LANGUAGE plpgsql
SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_queues text[];
    v_ids bigint[];
BEGIN
    IF p_run_ids IS NULL OR cardinality(p_run_ids) = 0 THEN
        RETURN 0;
    END IF;
    SELECT array_agg(DISTINCT r.queue) INTO v_queues
    FROM cronbox.run r
    WHERE r.run_id = ANY (p_run_ids) AND r.state = 'dispatched';
    IF v_queues IS NULL THEN
        RETURN 0;
    END IF;
    WITH gone AS (
        DELETE FROM cronbox.outbox o
        -- the rows found once (the outbox has no run_id index: one walk of those queues), then
        -- deleted by key; a semi-join planned while the outbox looked empty walked it per row
        WHERE o.outbox_id = ANY (ARRAY(
            SELECT o2.outbox_id FROM cronbox.outbox o2
            WHERE o2.kind = 'run' AND o2.queue = ANY (v_queues) AND o2.run_id = ANY (p_run_ids)
              AND (o2.lease_until IS NULL OR o2.lease_until <= p_now)
            FOR UPDATE SKIP LOCKED))
        RETURNING o.run_id
    )
    SELECT array_agg(gone.run_id ORDER BY gone.run_id) INTO v_ids FROM gone;
    IF v_ids IS NULL THEN
        RETURN 0;
    END IF;
    PERFORM cronbox.finish_runs(v_ids, 'cancelled', NULL,
        array_fill('overlap: superseded by a newer fire before delivery (cancel_other)'::text,
                   ARRAY[cardinality(v_ids)]), false, p_now);
    RETURN cardinality(v_ids);
END
$$;

COMMENT ON FUNCTION cronbox.withdraw_superseded_runs(bigint[],timestamp with time zone) IS
'Internal: cancel_other superseded these runs; those whose message no relay holds yet are withdrawn from the outbox and end cancelled at once. Returns the count.';

ALTER FUNCTION cronbox.withdraw_superseded_runs(bigint[],timestamp with time zone) OWNER TO cronbox_owner;
REVOKE ALL ON FUNCTION cronbox.withdraw_superseded_runs(bigint[],timestamp with time zone) FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
