-- cronbox.nack_outbox(p_owner, p_ids, p_errors, p_retryable, p_retry_after, p_max_attempts,
-- p_backoff, p_backoff_max, p_bucket): the relay reports failed sends, one array slot per row.
-- Rows still leased to p_owner either wait (available_at = now + exponential backoff from
-- p_backoff per attempt, capped at p_backoff_max, equal jitter, at least Retry-After) or,
-- when not retryable or out of attempts, move to cronbox.dead_letter; their runs become
-- failed with 'undeliverable: <error>' (job_stat.active_runs decremented). p_bucket: the bucket of
-- the rows (NULL: every bucket; on Citus one bucket is one shard: docs/citus.md).
-- The result type changed (dead_ids added): CREATE OR REPLACE cannot change it, so drop first
-- (same transaction as the re-create; grants.sql re-grants after every re-apply).
-- Thin wrapper: the body is cronbox.nack_outbox_at (internal/nack_outbox_at.sql), called with now().
CREATE OR REPLACE FUNCTION cronbox.nack_outbox(
    p_owner text,
    p_ids bigint[],
    p_errors text[],
    p_retryable boolean[] DEFAULT NULL::boolean[],
    p_retry_after double precision[] DEFAULT NULL::double precision[],
    p_max_attempts integer DEFAULT 10,
    p_backoff interval DEFAULT '00:00:01'::interval,
    p_backoff_max interval DEFAULT '00:10:00'::interval,
    p_bucket integer DEFAULT NULL::integer
) RETURNS TABLE(retried integer, dead integer, dead_ids bigint[])
LANGUAGE sql VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off
AS $$
    SELECT * FROM cronbox.nack_outbox_at($1, $2, $3, $4, $5, $6, $7, $8, $9, now())
$$;

COMMENT ON FUNCTION cronbox.nack_outbox(text, bigint[], text[], boolean[], double precision[], integer, interval, interval, integer) IS
'Relay: records failed sends of rows leased to p_owner. Retryable rows wait for exponential backoff with jitter (at least Retry-After); non-retryable rows and rows out of attempts move to cronbox.dead_letter and their runs become failed (undeliverable). Only the rows of bucket p_bucket (NULL: every bucket; one shard on Citus). Returns (retried, dead, dead_ids).';

ALTER FUNCTION cronbox.nack_outbox(text, bigint[], text[], boolean[], double precision[], integer, interval, interval, integer) OWNER TO cronbox_owner;
REVOKE ALL ON FUNCTION cronbox.nack_outbox(text, bigint[], text[], boolean[], double precision[], integer, interval, interval, integer) FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
GRANT EXECUTE ON FUNCTION cronbox.nack_outbox(text, bigint[], text[], boolean[], double precision[], integer, interval, interval, integer) TO cronbox_process;
