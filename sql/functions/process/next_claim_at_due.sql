-- cronbox.next_claim_at_due(p_ahead, p_bucket): how long until the first outbox row flagged
-- claim_at_due (an early 'skip' run, which a relay may claim only from its due time) within
-- p_ahead becomes claimable, so that a relay with a lead claims it then, not at its next
-- wake-up (up to half its lead later). NULL: none found. The wait is measured on the database's
-- clock (clock_timestamp()): the relay never compares its own clock with a stored time.
-- No locks, no writes: queue by queue (the queues with rows, a loose index scan of
-- outbox_queue_idx), one probe of outbox_flagged_idx (the flagged rows alone, migration 0465)
-- for the queue's first flagged row due within p_ahead.
-- p_bucket: that bucket's rows (a relay leasing buckets asks for each it holds); NULL: every
-- bucket (cronbox.bucket_walks: a statement per set). Under row security, as the caller's
-- role may read the outbox (the relay's reads every row).
CREATE OR REPLACE FUNCTION cronbox.next_claim_at_due(p_ahead interval, p_bucket integer DEFAULT NULL)
RETURNS interval
LANGUAGE plpgsql VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off  -- short statement: compiling costs more than running
SET enable_seqscan = off  -- a plan kept from an empty table: docs/architecture.md, SQL conventions
SET enable_bitmapscan = off  -- an ordered probe, never all flagged rows gathered and sorted
AS $$
DECLARE
    v_ahead interval := cronbox.checked_interval('p_ahead', p_ahead, interval '0', interval '1 hour');
    v_now timestamptz := clock_timestamp();
    v_set integer[];
    v_next timestamptz;
BEGIN
    FOREACH v_set SLICE 1 IN ARRAY cronbox.bucket_walks('cronbox.outbox', p_bucket) LOOP
        v_next := least(v_next, (
            WITH RECURSIVE queues(q) AS (
                (SELECT o.queue FROM cronbox.outbox o WHERE o.bucket = ANY (v_set) ORDER BY o.queue LIMIT 1)
                UNION ALL
                SELECT (SELECT o.queue FROM cronbox.outbox o WHERE o.bucket = ANY (v_set) AND o.queue > queues.q
                        ORDER BY o.queue LIMIT 1)
                FROM queues WHERE queues.q IS NOT NULL
            )
            SELECT min(w.available_at)
            FROM queues CROSS JOIN LATERAL (
                SELECT o.available_at
                FROM cronbox.outbox o
                WHERE o.bucket = ANY (v_set) AND o.queue = queues.q AND o.claim_at_due
                  AND o.available_at > v_now AND o.available_at <= v_now + v_ahead
                  AND o.lease_until IS NULL AND o.delivered_at IS NULL
                ORDER BY o.available_at
                LIMIT 1) w
            WHERE queues.q IS NOT NULL));
    END LOOP;
    RETURN v_next - clock_timestamp();
END
$$;

COMMENT ON FUNCTION cronbox.next_claim_at_due(interval, integer) IS
'Relay: the time until the first outbox row claimable only from its due time (an early skip run, claim_at_due) within p_ahead (0 .. 1 hour) is due, on the database''s clock, of bucket p_bucket (NULL: every bucket); NULL when none is. No locks.';

ALTER FUNCTION cronbox.next_claim_at_due(interval, integer) OWNER TO cronbox_owner;
REVOKE ALL ON FUNCTION cronbox.next_claim_at_due(interval, integer) FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
GRANT EXECUTE ON FUNCTION cronbox.next_claim_at_due(interval, integer) TO cronbox_process;
