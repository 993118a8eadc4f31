-- cronbox.buckets (Citus only): each bucket, the worker node that holds its shard now and the
-- poller and relay holding its lease (NULL: free, or its holder stopped renewing), since when.
-- Read through cronbox.bucket_placement() (why: that function's comment).
CREATE OR REPLACE VIEW cronbox.buckets AS
SELECT p.bucket_index, p.bucket, p.shard, p.node, p.poller, p.poller_since, p.relay, p.relay_since
FROM cronbox.bucket_placement() p;

COMMENT ON VIEW cronbox.buckets IS
'Citus: each bucket (index and value), its shard, the node holding it now, and the live poller and relay holding its lease (since when).';
