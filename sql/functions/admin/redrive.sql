-- cronbox.redrive(id, queue, everything): puts dead letters back into the outbox
-- (attempts reset, claimable now) and wakes the relays. Choose rows by dead_letter id, by
-- queue, or everything => true; id and queue combine with AND. A run that was marked
-- 'undeliverable' goes back to dispatched (job_stat.active_runs follows). One statement per table.
-- Returns the number of messages put back.
-- Thin wrapper: the body is cronbox.redrive_at (internal/redrive_at.sql), called with now().
CREATE OR REPLACE FUNCTION cronbox.redrive(
    id bigint DEFAULT NULL::bigint,
    queue text DEFAULT NULL::text,
    everything boolean DEFAULT false
) RETURNS integer
LANGUAGE sql VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT cronbox.redrive_at($1, $2, $3, now())
$$;

COMMENT ON FUNCTION cronbox.redrive(bigint, text, boolean) IS
'Puts dead letters back into the outbox (attempts reset): by id, by queue, or everything => true. Runs marked undeliverable go back to dispatched. Returns the count.';

ALTER FUNCTION cronbox.redrive(bigint, text, boolean) OWNER TO cronbox_owner;
REVOKE ALL ON FUNCTION cronbox.redrive(bigint, text, boolean) FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
GRANT EXECUTE ON FUNCTION cronbox.redrive(bigint, text, boolean) TO cronbox_admin;
