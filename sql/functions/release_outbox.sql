-- cronbox.release_outbox(p_owner, p_ids, p_now): a relay hands back leases it will not
-- finish (shutdown): rows still leased to p_owner (p_ids, or all of them when NULL) become
-- claimable now instead of when the lease ends. Row locks only; the no-ids form scans the
-- small outbox (shutdown only). Idempotent. Returns the number released.
CREATE OR REPLACE FUNCTION cronbox.release_outbox(
    p_owner text,
    p_ids bigint[] DEFAULT NULL,
    p_now timestamptz DEFAULT now()
) RETURNS integer
LANGUAGE sql
SET search_path = pg_catalog, pg_temp
SET jit = off  -- short OLTP statements: compiling costs more than running
AS $$
    WITH released AS (
        UPDATE cronbox.outbox o SET available_at = p_now, lease_owner = NULL
        WHERE o.lease_owner = p_owner
          AND o.available_at > p_now
          AND (p_ids IS NULL OR o.outbox_id = ANY (p_ids))
        RETURNING 1
    )
    SELECT count(*)::integer FROM released
$$;

COMMENT ON FUNCTION cronbox.release_outbox(text, bigint[], timestamptz) IS
'Relay: makes rows still leased to p_owner (p_ids, or all when NULL) claimable now; used at shutdown for sends that will not happen. Returns the count.';
