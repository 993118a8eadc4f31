-- cronbox.reconcile_pools(p_pools): recounts the units held by unfinished runs of the given
-- resource pools (NULL: all) and releases waiting fires into free units. The poller calls it
-- every minute, beside cronbox.reconcile_queue_limits.
-- Thin wrapper: the body is cronbox.reconcile_pools_at (internal/reconcile_pools_at.sql), called with now().
CREATE OR REPLACE FUNCTION cronbox.reconcile_pools(
    p_pools text[] DEFAULT NULL::text[]
) RETURNS integer
LANGUAGE sql VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT cronbox.reconcile_pools_at($1, now())
$$;

COMMENT ON FUNCTION cronbox.reconcile_pools(text[]) IS
'Recounts the units held by unfinished runs of resource pools (NULL: all) under the pools'' locks and releases waiting fires into free units. Returns the number of pools recounted.';

ALTER FUNCTION cronbox.reconcile_pools(text[]) OWNER TO cronbox_owner;
REVOKE ALL ON FUNCTION cronbox.reconcile_pools(text[]) FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
GRANT EXECUTE ON FUNCTION cronbox.reconcile_pools(text[]) TO cronbox_process;
