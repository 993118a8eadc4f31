-- cronbox.nack_outbox_unsent(p_owner, p_ids, p_lease, p_bucket): the relay hands back rows it claimed
-- but did not send: their queue's circuit breaker opened while they waited, or they waited so
-- long for a connection that their lease would run out mid-send. Rows still leased to p_owner
-- get back the place in the claim order they had before the claim (a claim leaves available_at
-- alone and leases through lease_until: clearing the lease is enough), so a backlog still
-- drains oldest first; p_lease is checked but no longer needed; the claim's attempt is taken back (nothing was sent), so a route that is down
-- never uses up its rows' attempts. Row locks by primary key only; idempotent (a row no longer
-- leased to p_owner is left alone). Returns the number handed back.
CREATE OR REPLACE FUNCTION cronbox.nack_outbox_unsent(
    p_owner text,
    p_ids bigint[],
    p_lease interval,
    p_bucket integer DEFAULT NULL
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
    v_count integer := 0;
BEGIN
    IF p_lease IS NULL OR p_lease <= interval '0' OR p_lease > interval '1 day' THEN
        RAISE EXCEPTION 'p_lease: must be the relay''s lease, positive and at most 1 day, got %', p_lease
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    -- Only the rows of bucket p_bucket, one shard where Citus distributes the outbox (NULL:
    -- every bucket, cronbox.bucket_walks; plain PostgreSQL has one, 0).
    v_walks := cronbox.bucket_walks('cronbox.outbox', p_bucket);
    FOR i IN 1 .. array_length(v_walks, 1) LOOP
        v_set := ARRAY(SELECT unnest(v_walks[i:i]));
        UPDATE cronbox.outbox o SET
            lease_owner = NULL,
            lease_until = NULL,
            attempts = greatest(o.attempts - 1, 0)
        WHERE o.bucket = ANY (v_set) AND o.outbox_id = ANY (p_ids) AND o.lease_owner = p_owner;
        GET DIAGNOSTICS v_n = ROW_COUNT;
        v_count := v_count + v_n;
    END LOOP;
    RETURN v_count;
END
$$;

COMMENT ON FUNCTION cronbox.nack_outbox_unsent(text, bigint[], interval, integer) IS
'Relay: hands back rows leased to p_owner that were never sent (circuit breaker open, or lease too short to send safely): claimable again at the place in the claim order they had before the claim (the lease is cleared, available_at was never moved), the claim''s attempt taken back. p_lease: the relay''s lease (positive, at most 1 day). Only the rows of bucket p_bucket (NULL: every bucket). Returns the count.';

ALTER FUNCTION cronbox.nack_outbox_unsent(text, bigint[], interval, integer) OWNER TO cronbox_owner;
REVOKE ALL ON FUNCTION cronbox.nack_outbox_unsent(text, bigint[], interval, integer) FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
GRANT EXECUTE ON FUNCTION cronbox.nack_outbox_unsent(text, bigint[], interval, integer) TO cronbox_process;
