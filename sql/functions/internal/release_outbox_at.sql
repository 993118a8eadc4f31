-- Internal: the body of cronbox.release_outbox, with the time as its last parameter p_now. The public
-- cronbox.release_outbox passes now(); no cronbox role may execute this one (tests call it as the
-- owner or a superuser to fix the clock).
-- cronbox.release_outbox_at(p_owner, p_ids, p_lease, p_bucket, p_now): a relay hands back leases it will not
-- finish (shutdown): rows still leased to p_owner (p_ids, or all of them when NULL) become
-- claimable now instead of when the lease ends. Row locks only; the no-ids form scans the
-- small outbox (shutdown only). Idempotent. Returns the number released. A row claimed ahead
-- of its due time (CRONBOX_DISPATCH_LEAD) stays unclaimable until that time: the claim never
-- moved available_at (the lease is lease_until), so clearing the lease is all; p_lease is
-- checked and kept for callers but no longer needed. p_bucket: only that bucket's rows, one
-- shard where Citus distributes the outbox (NULL: every bucket, cronbox.bucket_walks; plain
-- PostgreSQL has one, 0).
CREATE OR REPLACE FUNCTION cronbox.release_outbox_at(
    p_owner text,
    p_ids bigint[] DEFAULT NULL,
    p_lease interval DEFAULT NULL,
    p_bucket integer DEFAULT NULL,
    p_now timestamptz DEFAULT now()
) RETURNS integer
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off  -- short OLTP statements: compiling costs more than running
AS $$
DECLARE
    v_walks integer[];
    v_set integer[];
    v_n integer;
    v_released integer := 0;
BEGIN
    v_walks := cronbox.bucket_walks('cronbox.outbox', p_bucket);
    FOR i IN 1 .. array_length(v_walks, 1) LOOP
        v_set := ARRAY(SELECT unnest(v_walks[i:i]));
        IF p_ids IS NULL THEN
            UPDATE cronbox.outbox o SET lease_owner = NULL, lease_until = NULL
            WHERE o.bucket = ANY (v_set) AND o.lease_owner = p_owner AND o.lease_until > p_now;
        ELSE
            UPDATE cronbox.outbox o SET lease_owner = NULL, lease_until = NULL
            WHERE o.bucket = ANY (v_set) AND o.outbox_id = ANY (p_ids)
              AND o.lease_owner = p_owner AND o.lease_until > p_now;
        END IF;
        GET DIAGNOSTICS v_n = ROW_COUNT;
        v_released := v_released + v_n;
    END LOOP;
    RETURN v_released;
END
$$;

COMMENT ON FUNCTION cronbox.release_outbox_at(text, bigint[], interval, integer, timestamp with time zone) IS
'Internal (no cronbox role may execute it): the body of cronbox.release_outbox(text, bigint[], interval, integer) with the time as p_now; tests use it to fix the clock. Relay: makes rows still leased to p_owner (p_ids, or all when NULL; of bucket p_bucket, or every bucket when NULL) claimable now (or, given the lease, at their due time if that is later); used at shutdown for sends that will not happen. Returns the count.';

ALTER FUNCTION cronbox.release_outbox_at(text, bigint[], interval, integer, timestamp with time zone) OWNER TO cronbox_owner;
REVOKE ALL ON FUNCTION cronbox.release_outbox_at(text, bigint[], interval, integer, timestamp with time zone) FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
