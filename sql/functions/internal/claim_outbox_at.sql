-- Internal: the body of cronbox.claim_outbox, with the time as its last parameter p_now. The public
-- cronbox.claim_outbox passes now(); no cronbox role may execute this one (tests call it as the
-- owner or a superuser to fix the clock).
-- cronbox.claim_outbox_at(p_owner, p_limit, p_lease, p_queues, p_exclude, p_now): the relay's
-- claim. Leases up to p_limit available outbox rows (oldest first) to p_owner for p_lease by
-- pushing available_at to the lease end; FOR UPDATE SKIP LOCKED on outbox_claim_idx, so
-- relays get disjoint rows. p_queues (NULL = all) / p_exclude (NULL = none) keep pull-mode
-- queues out. A relay that dies leaves rows that come back when the lease ends.
-- Counts the attempt; returns the messages with their deadline (now + timeout) filled in.
-- p_ahead (CRONBOX_DISPATCH_LEAD) also takes rows that become available within p_ahead
-- (written early by cronbox.dispatch_ahead): the relay holds them until available_at, which
-- is returned, and the lease runs from then.
CREATE OR REPLACE FUNCTION cronbox.claim_outbox_at(
    p_owner text,
    p_limit integer,
    p_lease interval DEFAULT '30 seconds',
    p_queues text[] DEFAULT NULL,
    p_exclude text[] DEFAULT NULL,
    p_ahead interval DEFAULT '0',
    p_now timestamptz DEFAULT now()
) RETURNS TABLE (outbox_id bigint, run_id bigint, queue text, kind text, message jsonb, attempts integer,
                 available_at timestamptz)
LANGUAGE sql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off  -- short OLTP statements: compiling costs more than running
AS $$
    WITH picked AS (
        SELECT o.outbox_id, o.available_at
        FROM cronbox.outbox o
        WHERE o.available_at <= p_now + p_ahead
          AND (p_queues IS NULL OR o.queue = ANY (p_queues))
          AND (p_exclude IS NULL OR o.queue <> ALL (p_exclude))
        ORDER BY o.available_at
        LIMIT p_limit
        FOR UPDATE SKIP LOCKED
    )
    UPDATE cronbox.outbox o SET
        available_at = greatest(p.available_at, p_now) + p_lease,
        lease_owner = p_owner,
        attempts = o.attempts + 1
    FROM picked p
    WHERE o.outbox_id = p.outbox_id
    RETURNING o.outbox_id, o.run_id, o.queue, o.kind,
              CASE WHEN o.kind = 'run'
                   THEN o.message || jsonb_build_object('deadline', greatest(p.available_at, p_now) + o.timeout)
                   ELSE o.message END,
              o.attempts, p.available_at
$$;

COMMENT ON FUNCTION cronbox.claim_outbox_at(text, integer, interval, text[], text[], interval, timestamp with time zone) IS
'Internal (no cronbox role may execute it): the body of cronbox.claim_outbox(text, integer, interval, text[], text[], interval) with the time as p_now; tests use it to fix the clock. Relay: leases up to p_limit outbox rows available by now + p_ahead (SKIP LOCKED, outbox_claim_idx) for p_lease from their available time, only queues in p_queues (NULL = all) and not in p_exclude, and returns the messages, deadline included, and when each is due. Unacked rows come back when the lease ends: at least once.';

ALTER FUNCTION cronbox.claim_outbox_at(text, integer, interval, text[], text[], interval, timestamp with time zone) OWNER TO cronbox_owner;
REVOKE ALL ON FUNCTION cronbox.claim_outbox_at(text, integer, interval, text[], text[], interval, timestamp with time zone) FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
