-- cronbox.release_buckets(kind, owner) (Citus only): a poller or relay stopping cleanly gives
-- up its bucket leases (free at once for the others' next cronbox.lease_buckets) and leaves the
-- count of live processes. Returns the number of buckets released. Row locks: its own rows.
CREATE OR REPLACE FUNCTION cronbox.release_buckets(kind text, owner text) RETURNS integer
LANGUAGE plpgsql VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_released integer;
BEGIN
    PERFORM cronbox.assert_one_of('kind', kind, ARRAY['poller', 'relay']);
    PERFORM cronbox.assert_not_null('owner', owner);
    DELETE FROM cronbox.bucket_member m WHERE m.kind = release_buckets.kind AND m.owner = release_buckets.owner;
    UPDATE cronbox.bucket_lease l SET owner = NULL, held_since = NULL
    WHERE l.kind = release_buckets.kind AND l.owner = release_buckets.owner;
    GET DIAGNOSTICS v_released = ROW_COUNT;
    RETURN v_released;
END
$$;

COMMENT ON FUNCTION cronbox.release_buckets(text, text) IS
'Citus: a poller or relay stopping cleanly gives up its bucket leases and leaves the live count; returns how many buckets it released.';

ALTER FUNCTION cronbox.release_buckets(text, text) OWNER TO cronbox_owner;
REVOKE ALL ON FUNCTION cronbox.release_buckets(text, text) FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
GRANT EXECUTE ON FUNCTION cronbox.release_buckets(text, text) TO cronbox_process;
