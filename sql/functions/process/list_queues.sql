-- cronbox.list_queues(): every queue in use, with how many messages wait in the outbox.
-- The relay checks its routes against it at start and warns about unrouted queues later.
-- Reads job (queue only) and outbox; no locks. A process-role function: the relay cannot
-- read the tables themselves.
CREATE OR REPLACE FUNCTION cronbox.list_queues()
RETURNS TABLE (queue text, waiting bigint)
LANGUAGE sql STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT q.queue, coalesce(o.waiting, 0)
    FROM (SELECT j.queue FROM cronbox.job j UNION SELECT o.queue FROM cronbox.outbox o) q
    -- waiting messages: not runs already delivered or running (their rows stay until they end)
    LEFT JOIN (SELECT o.queue, count(*) AS waiting FROM cronbox.outbox o
               WHERE coalesce(o.state, 'dispatched') = 'dispatched' GROUP BY o.queue) o
           ON o.queue = q.queue
    ORDER BY q.queue
$$;

COMMENT ON FUNCTION cronbox.list_queues() IS
'Every queue in use (by a job or a waiting message) with the number of messages waiting in the outbox. The relay checks its routes against it.';

ALTER FUNCTION cronbox.list_queues() OWNER TO cronbox_owner;
REVOKE ALL ON FUNCTION cronbox.list_queues() FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
GRANT EXECUTE ON FUNCTION cronbox.list_queues() TO cronbox_process;
