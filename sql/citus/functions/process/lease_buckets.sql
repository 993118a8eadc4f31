-- cronbox.lease_buckets(kind, owner, lease) (Citus only): a poller or relay (kind) named
-- `owner` takes, renews or gives up bucket leases so that the live processes of its kind hold
-- the buckets evenly, no leader: call it every third of `lease` (1 second to 1 hour, default 10
-- seconds) and work only the buckets it returns, for at most `valid_for` from the call. A
-- newcomer gets its share within about two calls of the others; a process that stops calling
-- has its buckets taken within one lease and one call of the others. Locks taken: its own rows
-- and rows locked with SKIP LOCKED (cronbox.lease_buckets_at). Safe to call any number of times.
-- Thin wrapper: the body is cronbox.lease_buckets_at, called with clock_timestamp().
CREATE OR REPLACE FUNCTION cronbox.lease_buckets(
    kind text, owner text, lease interval DEFAULT '00:00:10'::interval
) RETURNS TABLE (buckets integer[], valid_for interval, members integer, share integer)
LANGUAGE sql VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT * FROM cronbox.lease_buckets_at($1, $2, $3, clock_timestamp())
$$;

COMMENT ON FUNCTION cronbox.lease_buckets(text, text, interval) IS
'Citus: a poller or relay (kind) takes, renews or gives up bucket leases so that the live processes of its kind share the buckets evenly; returns the buckets it holds, for how long, the live processes of its kind and its share. Call every third of the lease (1 s to 1 h, default 10 s).';

ALTER FUNCTION cronbox.lease_buckets(text, text, interval) OWNER TO cronbox_owner;
REVOKE ALL ON FUNCTION cronbox.lease_buckets(text, text, interval) FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
GRANT EXECUTE ON FUNCTION cronbox.lease_buckets(text, text, interval) TO cronbox_process;
