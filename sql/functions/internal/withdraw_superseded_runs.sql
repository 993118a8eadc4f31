-- cronbox.withdraw_superseded_runs(p_run_ids, p_now): overlap 'cancel_other' asked these runs to
-- stop because a newer fire of their job was just dispatched. Those whose message is still
-- waiting in the outbox (no relay holds it: lease_until NULL or over) never reach a
-- worker: the message is deleted and the run ends 'cancelled' at once, through finish_runs
-- (their slots freed in the same transaction). A message a relay holds is not recalled: its
-- run keeps cancel_requested (start_run refuses it, heartbeat answers 'cancel'). Reads the
-- outbox by key (a run's outbox row has its run id as key). Called by dispatch with the
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
    v_ids bigint[];
BEGIN
    IF p_run_ids IS NULL OR cardinality(p_run_ids) = 0 THEN
        RETURN 0;
    END IF;
    -- The runs still waiting for a relay (dispatched, not under a relay's lease), by key.
    v_ids := ARRAY(
        SELECT o.outbox_id FROM cronbox.outbox o
        WHERE o.outbox_id = ANY (p_run_ids) AND o.kind = 'run' AND o.state = 'dispatched'
          AND (o.lease_until IS NULL OR o.lease_until <= p_now)
        ORDER BY o.outbox_id);
    IF cardinality(v_ids) = 0 THEN
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
