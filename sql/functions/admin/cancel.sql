-- cronbox.cancel(run_id): request cancellation of a run. A run still in the outbox
-- (dispatched) is cancelled at once and its message withdrawn (unless a relay is sending it
-- right now: the worker's start_run will then refuse it). A delivered or running run is
-- flagged: its worker's next heartbeat answers 'cancel'; it ends 'cancelled' when the worker
-- reports or its lease expires. Returns 'cancelled' or 'cancel_requested'. Raises P0002 for
-- an unknown run, 55000 for a run already final.
-- Thin wrapper: the body is cronbox.cancel_at (internal/cancel_at.sql), called with now().
CREATE OR REPLACE FUNCTION cronbox.cancel(
    run_id bigint
) RETURNS text
LANGUAGE sql VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT cronbox.cancel_at($1, now())
$$;

COMMENT ON FUNCTION cronbox.cancel(bigint) IS
'Requests cancellation of a run: cancelled at once while still in the outbox, otherwise flagged so the worker''s heartbeat answers ''cancel''. Returns ''cancelled'' or ''cancel_requested''; raises 55000 for a run already final.';

ALTER FUNCTION cronbox.cancel(bigint) OWNER TO cronbox_owner;
REVOKE ALL ON FUNCTION cronbox.cancel(bigint) FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
GRANT EXECUTE ON FUNCTION cronbox.cancel(bigint) TO cronbox_admin, cronbox_user;
