-- Internal: the body of cronbox.release_outbox, with the time as its last parameter p_now. The public
-- cronbox.release_outbox passes now(); no cronbox role may execute this one (tests call it as the
-- owner or a superuser to fix the clock).
-- cronbox.release_outbox_at(p_owner, p_ids, p_now): a relay hands back leases it will not
-- finish (shutdown): rows still leased to p_owner (p_ids, or all of them when NULL) become
-- claimable now instead of when the lease ends. Row locks only; the no-ids form scans the
-- small outbox (shutdown only). Idempotent. Returns the number released. A row claimed ahead
-- of its due time (CRONBOX_DISPATCH_LEAD) stays unclaimable until that time: the claim never
-- moved available_at (the lease is lease_until), so clearing the lease is all; p_lease is
-- checked and kept for callers but no longer needed.
CREATE OR REPLACE FUNCTION cronbox.release_outbox_at(
    p_owner text,
    p_ids bigint[] DEFAULT NULL,
    p_lease interval DEFAULT NULL,
    p_now timestamptz DEFAULT now()
) RETURNS integer
LANGUAGE sql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off  -- short OLTP statements: compiling costs more than running
AS $$
    WITH released AS (
        UPDATE cronbox.outbox o SET lease_owner = NULL, lease_until = NULL
        WHERE o.lease_owner = p_owner
          AND o.lease_until > p_now
          AND (p_ids IS NULL OR o.outbox_id = ANY (p_ids))
        RETURNING 1
    )
    SELECT count(*)::integer FROM released
$$;

COMMENT ON FUNCTION cronbox.release_outbox_at(text, bigint[], interval, timestamp with time zone) IS
'Internal (no cronbox role may execute it): the body of cronbox.release_outbox(text, bigint[], interval) with the time as p_now; tests use it to fix the clock. Relay: makes rows still leased to p_owner (p_ids, or all when NULL) claimable now (or, given the lease, at their due time if that is later); used at shutdown for sends that will not happen. Returns the count.';

ALTER FUNCTION cronbox.release_outbox_at(text, bigint[], interval, timestamp with time zone) OWNER TO cronbox_owner;
REVOKE ALL ON FUNCTION cronbox.release_outbox_at(text, bigint[], interval, timestamp with time zone) FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
