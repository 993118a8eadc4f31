-- cronbox.ack_outbox(p_owner, p_ids, p_outcomes, p_bucket): the relay's second transaction.
-- Deletes the delivered rows still leased to p_owner (a lease that ran out and was taken by
-- another relay is that relay's to ack) and moves their runs dispatched -> delivered with a
-- lease of the run's timeout. p_outcomes (optional, a JSON array of {outbox_id, state:
-- succeeded|failed, result, error, retryable}) finishes those runs instead, straight from
-- dispatched, set-based through cronbox.finish_runs (one call per kind, not per run), only
-- for rows acked here, so repeating an ack whose commit was lost changes nothing; or one
-- answer for every run acked, a JSON object without outbox_id ({"state": "succeeded"}).
-- Returns the number of rows acked. p_bucket: the bucket of the rows (NULL: every bucket; on
-- Citus one bucket is one shard, and the call runs on the node holding it: docs/citus.md).
-- Thin wrapper: the body is cronbox.ack_outbox_at (internal/ack_outbox_at.sql), called with now().
CREATE OR REPLACE FUNCTION cronbox.ack_outbox(
    p_owner text,
    p_ids bigint[],
    p_outcomes jsonb DEFAULT NULL::jsonb,
    p_bucket integer DEFAULT NULL::integer
) RETURNS integer
LANGUAGE sql VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off
SET plan_cache_mode = force_generic_plan
AS $$
    SELECT cronbox.ack_outbox_at($1, $2, $3, $4, now())
$$;

COMMENT ON FUNCTION cronbox.ack_outbox(text, bigint[], jsonb, integer) IS
'Relay: deletes delivered outbox rows still leased to p_owner and marks their runs delivered (lease = run timeout); optional p_outcomes (JSON array of {outbox_id, state, result, error, retryable}) completes or fails those runs in the same transaction; p_outcomes may also be one object {state, ...} without outbox_id, the answer of every run acked. Only the rows of bucket p_bucket (NULL: every bucket). Returns the count acked.';

ALTER FUNCTION cronbox.ack_outbox(text, bigint[], jsonb, integer) OWNER TO cronbox_runner;
REVOKE ALL ON FUNCTION cronbox.ack_outbox(text, bigint[], jsonb, integer) FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
GRANT EXECUTE ON FUNCTION cronbox.ack_outbox(text, bigint[], jsonb, integer) TO cronbox_process;
