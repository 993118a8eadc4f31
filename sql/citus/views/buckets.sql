-- cronbox.buckets (Citus only): each bucket, the worker node that holds its shard now (read
-- from Citus's metadata at each query, so a shard moved by the rebalancer shows where it went)
-- and the poller and relay holding its lease (NULL: free, or its holder stopped renewing).
CREATE OR REPLACE VIEW cronbox.buckets AS
SELECT b.bucket_index,
       b.bucket,
       s.shardid AS shard,
       n.nodename || ':' || n.nodeport AS node,
       p.owner AS poller,
       p.held_since AS poller_since,
       r.owner AS relay,
       r.held_since AS relay_since
FROM cronbox.bucket b
LEFT JOIN pg_catalog.pg_dist_shard s
       ON s.logicalrelid = 'cronbox.bucket_shard'::regclass
      AND b.hash_min = s.shardminvalue::integer
LEFT JOIN pg_catalog.pg_dist_placement pl ON pl.shardid = s.shardid
LEFT JOIN pg_catalog.pg_dist_node n ON n.groupid = pl.groupid AND n.noderole = 'primary'
LEFT JOIN cronbox.bucket_lease p ON p.kind = 'poller' AND p.bucket = b.bucket AND EXISTS (
    SELECT 1 FROM cronbox.bucket_member m WHERE m.kind = 'poller' AND m.owner = p.owner AND m.alive_until >= now())
LEFT JOIN cronbox.bucket_lease r ON r.kind = 'relay' AND r.bucket = b.bucket AND EXISTS (
    SELECT 1 FROM cronbox.bucket_member m WHERE m.kind = 'relay' AND m.owner = r.owner AND m.alive_until >= now());

COMMENT ON VIEW cronbox.buckets IS
'Citus: each bucket (index and value), its shard, the node holding it now, and the live poller and relay holding its lease (since when).';
