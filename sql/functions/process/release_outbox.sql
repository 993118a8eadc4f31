-- cronbox.release_outbox(p_owner, p_ids, p_lease, p_bucket): a relay hands back leases it will not
-- finish (shutdown): rows still leased to p_owner (p_ids, or all of them when NULL) become
-- claimable now instead of when the lease ends. Row locks only; the no-ids form scans the
-- small outbox (shutdown only). Idempotent. Returns the number released. A row claimed ahead
-- of its due time (CRONBOX_DISPATCH_LEAD) stays unclaimable until that time: the claim never
-- moved available_at (the lease is lease_until), so clearing the lease is all; p_lease is
-- checked and kept for callers but no longer needed.
-- Bounds: p_lease NULL or 0..1 day.
-- Thin wrapper: the body is cronbox.release_outbox_at (internal/release_outbox_at.sql), called with now().
CREATE OR REPLACE FUNCTION cronbox.release_outbox(
    p_owner text,
    p_ids bigint[] DEFAULT NULL::bigint[],
    p_lease interval DEFAULT NULL::interval,
    p_bucket integer DEFAULT NULL::integer
) RETURNS integer
LANGUAGE sql VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off
AS $$
    SELECT cronbox.release_outbox_at($1, $2,
        cronbox.checked_interval('p_lease', $3, interval '0', interval '1 day', true), $4, now())
$$;

COMMENT ON FUNCTION cronbox.release_outbox(text, bigint[], interval, integer) IS
'Relay: makes rows still leased to p_owner (p_ids, or all when NULL; of bucket p_bucket, or every bucket when NULL) claimable now (or, given the lease, at their due time if that is later); used at shutdown for sends that will not happen. Returns the count.';

ALTER FUNCTION cronbox.release_outbox(text, bigint[], interval, integer) OWNER TO cronbox_owner;
REVOKE ALL ON FUNCTION cronbox.release_outbox(text, bigint[], interval, integer) FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
GRANT EXECUTE ON FUNCTION cronbox.release_outbox(text, bigint[], interval, integer) TO cronbox_process;
