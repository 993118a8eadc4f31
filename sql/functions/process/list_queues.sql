-- cronbox.list_queues(p_bucket): every queue in use, with how many messages wait in the outbox.
-- The relay checks its routes against it at start and warns about unrouted queues later.
-- Reads job (queue only) and outbox; no locks. A process-role function: the relay cannot
-- read the tables themselves. p_bucket: that bucket's jobs and messages only (a relay on
-- Citus reads bucket by bucket, so that a worker node down holds only its own buckets' queues
-- back: docs/citus.md, "A worker node stopped"); NULL: every bucket in one statement.
-- PL/pgSQL, planned with the bucket bound (Citus plans no parameterized SQL function over a
-- distributed table).
CREATE OR REPLACE FUNCTION cronbox.list_queues(p_bucket integer DEFAULT NULL)
RETURNS TABLE (queue text, waiting bigint)
LANGUAGE plpgsql STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    PERFORM cronbox.bucket_walks('cronbox.outbox', p_bucket);  -- a negative bucket: 22023
    RETURN QUERY
    SELECT q.queue, coalesce(o.waiting, 0)
    FROM (SELECT j.queue FROM cronbox.job j WHERE p_bucket IS NULL OR j.bucket = p_bucket
          UNION
          SELECT o.queue FROM cronbox.outbox o WHERE p_bucket IS NULL OR o.bucket = p_bucket) q
    -- waiting messages: not runs already delivered or running (their rows stay until they end)
    LEFT JOIN (SELECT o.queue, count(*) AS waiting FROM cronbox.outbox o
               WHERE coalesce(o.state, 'dispatched') = 'dispatched' AND (p_bucket IS NULL OR o.bucket = p_bucket)
               GROUP BY o.queue) o
           ON o.queue = q.queue
    ORDER BY q.queue;
END
$$;

COMMENT ON FUNCTION cronbox.list_queues(integer) IS
'Every queue in use (by a job or a waiting message) with the number of messages waiting in the outbox, of bucket p_bucket only when given (NULL: every bucket; negative: 22023). The relay checks its routes against it.';

ALTER FUNCTION cronbox.list_queues(integer) OWNER TO cronbox_owner;
REVOKE ALL ON FUNCTION cronbox.list_queues(integer) FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
GRANT EXECUTE ON FUNCTION cronbox.list_queues(integer) TO cronbox_process;
