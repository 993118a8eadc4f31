-- cronbox.claim_outbox(p_owner, p_limit, p_lease, p_queues, p_exclude): the relay's
-- claim. Leases up to p_limit available outbox rows to p_owner for p_lease (lease_until, a
-- column no index covers: the claim is a HOT update): queue by queue, the queue whose first
-- claimable row is oldest first, each queue's rows oldest first (outbox_queue_idx); FOR UPDATE
-- SKIP LOCKED, so relays get disjoint rows. p_queues (NULL = all) / p_exclude (NULL = none) keep
-- pull-mode queues and the relay's full or broken lanes out, at one index probe each per claim.
-- A relay that dies leaves rows that come back when the lease ends.
-- Counts the attempt; returns the messages (json, the text the relay sends) with their deadline
-- (now + timeout) filled in, and each message's idempotency key and fire time beside it.
-- p_ahead (CRONBOX_DISPATCH_LEAD) also takes rows that become available within p_ahead
-- (written early by cronbox.dispatch_ahead): the relay holds them until available_at, which
-- is returned, and the lease runs from then.
-- p_bucket: only that bucket's rows (one shard on Citus); NULL: every bucket in turn, from a
-- random one, until p_limit (plain PostgreSQL has one, 0). Each row comes with its bucket.
-- p_parts: a run's message comes as its parts (job, payload as text, attempt, deadline; message
-- NULL) for a caller that writes the same text itself (the relay), where its times are within
-- 1900-2100; otherwise, and without p_parts, the message as json.
-- Bounds: p_limit 1..100,000, p_lease 1 s..1 day, p_ahead 0..1 hour, p_bucket NULL or 0 or more.
-- Thin wrapper: the body is cronbox.claim_outbox_at (internal/claim_outbox_at.sql), called with now().
CREATE OR REPLACE FUNCTION cronbox.claim_outbox(
    p_owner text,
    p_limit integer,
    p_lease interval DEFAULT '00:00:30'::interval,
    p_queues text[] DEFAULT NULL::text[],
    p_exclude text[] DEFAULT NULL::text[],
    p_ahead interval DEFAULT '00:00:00'::interval,
    p_bucket integer DEFAULT NULL,
    p_parts boolean DEFAULT false
) RETURNS TABLE(outbox_id bigint, run_id bigint, queue text, kind text, message json, attempts integer,
                available_at timestamp with time zone, bucket integer, idempotency_key text,
                fire_at timestamp with time zone, job text, payload text, attempt integer,
                deadline timestamp with time zone)
LANGUAGE sql VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off
AS $$
    SELECT * FROM cronbox.claim_outbox_at($1, cronbox.checked_limit('p_limit', $2, 100000),
        cronbox.checked_interval('p_lease', $3, interval '1 second', interval '1 day'), $4, $5,
        cronbox.checked_interval('p_ahead', $6, interval '0', interval '1 hour'), $7, coalesce($8, false), now())
$$;

COMMENT ON FUNCTION cronbox.claim_outbox(text, integer, interval, text[], text[], interval, integer, boolean) IS
'Relay: leases up to p_limit outbox rows available by now + p_ahead (SKIP LOCKED; queue by queue on outbox_queue_idx, a left-out queue costs one probe) for p_lease from their available time, only queues in p_queues (NULL = all) and not in p_exclude, from bucket p_bucket (NULL = every bucket in turn), and returns the messages (json), deadline included, when each is due, its bucket, and the message''s idempotency key and fire time; with p_parts a run''s message as its parts (job, payload, attempt, deadline) instead, for a caller that writes the same text. Unacked rows come back when the lease ends: at least once.';

ALTER FUNCTION cronbox.claim_outbox(text, integer, interval, text[], text[], interval, integer, boolean) OWNER TO cronbox_runner;
REVOKE ALL ON FUNCTION cronbox.claim_outbox(text, integer, interval, text[], text[], interval, integer, boolean) FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
GRANT EXECUTE ON FUNCTION cronbox.claim_outbox(text, integer, interval, text[], text[], interval, integer, boolean) TO cronbox_process;
