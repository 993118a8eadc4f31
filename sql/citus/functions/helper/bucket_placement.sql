-- cronbox.bucket_placement() (Citus only): the rows of the view cronbox.buckets: each bucket,
-- its shard, the worker node holding it now (Citus's metadata, read at each call, so a shard
-- moved by the rebalancer shows where it went) and the live poller and relay holding its lease.
-- SECURITY DEFINER: on Citus a view's reference table is read through its shard with the
-- privileges of the role querying the view, which may not read cronbox's tables; only callers
-- who read everything (cronbox.caller_reads_all: readers, administrators, processes) get rows.
-- No locks.
CREATE OR REPLACE FUNCTION cronbox.bucket_placement()
RETURNS TABLE (bucket_index integer, bucket integer, shard bigint, node text,
               poller text, poller_since timestamptz, relay text, relay_since timestamptz)
LANGUAGE sql STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT b.bucket_index, b.bucket, s.shardid, n.nodename || ':' || n.nodeport,
           p.owner, p.held_since, r.owner, r.held_since
    FROM cronbox.bucket b
    LEFT JOIN pg_dist_shard s ON s.logicalrelid = 'cronbox.bucket_shard'::regclass
                             AND b.hash_min = s.shardminvalue::integer
    LEFT JOIN pg_dist_placement pl ON pl.shardid = s.shardid
    LEFT JOIN pg_dist_node n ON n.groupid = pl.groupid AND n.noderole = 'primary'
    LEFT JOIN cronbox.bucket_lease p ON p.kind = 'poller' AND p.bucket = b.bucket AND EXISTS (
        SELECT 1 FROM cronbox.bucket_member m WHERE m.kind = 'poller' AND m.owner = p.owner AND m.alive_until >= now())
    LEFT JOIN cronbox.bucket_lease r ON r.kind = 'relay' AND r.bucket = b.bucket AND EXISTS (
        SELECT 1 FROM cronbox.bucket_member m WHERE m.kind = 'relay' AND m.owner = r.owner AND m.alive_until >= now())
    WHERE cronbox.caller_reads_all()
    ORDER BY b.bucket_index
$$;

COMMENT ON FUNCTION cronbox.bucket_placement() IS
'Citus: the rows of cronbox.buckets (each bucket, its shard, its node now, its poller and relay); none for a caller who does not read everything.';

ALTER FUNCTION cronbox.bucket_placement() OWNER TO cronbox_owner;
REVOKE ALL ON FUNCTION cronbox.bucket_placement() FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
GRANT EXECUTE ON FUNCTION cronbox.bucket_placement() TO cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
