-- cronbox.worker_may_work(p_queue): may the caller claim, start, heartbeat, complete and fail
-- runs of p_queue? Yes when no worker grant exists at all (the default: one probe of
-- cronbox.queue_grant's primary key), when the caller is an operator (admin, superuser,
-- cronbox_process: the relay acks every queue), when p_queue is granted to the caller as a
-- worker queue, or when neither the queue nor the caller has a worker grant (open queues are
-- open to unlimited workers; a worker role with grants is limited to them). No locks.
CREATE OR REPLACE FUNCTION cronbox.worker_may_work(p_queue text) RETURNS boolean
LANGUAGE plpgsql STABLE
SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    RETURN NOT EXISTS (SELECT 1 FROM cronbox.queue_grant g WHERE g.kind = 'worker')
            OR cronbox.caller_is_operator()
            OR cronbox.caller_granted_queue('worker', p_queue)
            OR (NOT EXISTS (SELECT 1 FROM cronbox.queue_grant g WHERE g.kind = 'worker' AND g.queue = p_queue)
                AND NOT cronbox.caller_granted_queue('worker', NULL));
END
$$;

COMMENT ON FUNCTION cronbox.worker_may_work(text) IS
'Internal: true when the caller may work runs of the queue (no worker grants anywhere; an operator; the queue granted to it; or an open queue and a caller limited to none).';

ALTER FUNCTION cronbox.worker_may_work(text) OWNER TO cronbox_owner;
REVOKE ALL ON FUNCTION cronbox.worker_may_work(text) FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
