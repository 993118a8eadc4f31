-- cronbox.nack_outbox_unsent(p_owner, p_ids, p_delay): the relay hands back rows it claimed
-- but did not send: their queue's circuit breaker opened while they waited, or they waited so
-- long for a connection that their lease would run out mid-send. Rows still leased to p_owner
-- become claimable again after p_delay (the breaker's probe interval; 0 = at once) and the
-- claim's attempt is taken back (nothing was sent), so a route that is down never uses up
-- rows' attempts. Row locks by primary key only; idempotent. Returns the number handed back.
CREATE OR REPLACE FUNCTION cronbox.nack_outbox_unsent(
    p_owner text,
    p_ids bigint[],
    p_delay interval DEFAULT '0'
) RETURNS integer
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
SET jit = off  -- short OLTP statements: compiling costs more than running
AS $$
DECLARE
    v_count integer;
BEGIN
    IF p_delay IS NULL OR p_delay < interval '0' OR p_delay > interval '1 day' THEN
        RAISE EXCEPTION 'p_delay: must be from 0 to 1 day, got %', p_delay
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    WITH handed AS (
        UPDATE cronbox.outbox o SET
            available_at = now() + p_delay,
            lease_owner = NULL,
            attempts = greatest(o.attempts - 1, 0)
        WHERE o.outbox_id = ANY (p_ids) AND o.lease_owner = p_owner
        RETURNING 1
    )
    SELECT count(*)::integer INTO v_count FROM handed;
    RETURN v_count;
END
$$;

COMMENT ON FUNCTION cronbox.nack_outbox_unsent(text, bigint[], interval) IS
'Relay: hands back rows leased to p_owner that were never sent (circuit breaker open, or lease too short to send safely): claimable again after p_delay (0 to 1 day), the claim''s attempt taken back. Returns the count.';
