-- cronbox.unreachable_buckets(p_table): the buckets of p_table whose Citus worker node the
-- coordinator cannot reach now (citus_check_connection_to_node, once per node holding one of
-- its shards), in bucket order, with their nodes; no rows where p_table is not distributed by
-- bucket (plain PostgreSQL, or --citus with the tables still the coordinator's own). For the
-- calls that go over every bucket of their own choice (a bulk pause or resume), so that they
-- do the buckets they can reach and name the others instead of failing whole. A node that goes
-- between this look and the call's statements still fails the call (08006). No locks.
CREATE OR REPLACE FUNCTION cronbox.unreachable_buckets(p_table regclass)
RETURNS TABLE (bucket integer, node text)
LANGUAGE plpgsql VOLATILE
SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF to_regclass('pg_catalog.pg_dist_partition') IS NULL THEN
        RETURN;  -- plain PostgreSQL (checked apart: the next statement names a Citus table)
    END IF;
    IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_dist_partition p WHERE p.logicalrelid = p_table AND p.partmethod = 'h') THEN
        RETURN;
    END IF;
    RETURN QUERY EXECUTE
        'WITH node AS MATERIALIZED (
             SELECT n.groupid, n.nodename || '':'' || n.nodeport AS node,
                    pg_catalog.citus_check_connection_to_node(n.nodename, n.nodeport) AS up
             FROM pg_catalog.pg_dist_node n
             WHERE n.noderole = ''primary'' AND n.isactive
               AND n.groupid IN (SELECT pl.groupid FROM pg_catalog.pg_dist_placement pl
                                 JOIN pg_catalog.pg_dist_shard s USING (shardid) WHERE s.logicalrelid = $1))
         SELECT b.bucket, n.node
         FROM cronbox.bucket b
         JOIN pg_catalog.pg_dist_shard s ON s.logicalrelid = $1 AND b.hash_min = s.shardminvalue::integer
         JOIN pg_catalog.pg_dist_placement pl ON pl.shardid = s.shardid
         JOIN node n ON n.groupid = pl.groupid
         WHERE NOT n.up
         ORDER BY b.bucket' USING p_table;
END
$$;

COMMENT ON FUNCTION cronbox.unreachable_buckets(regclass) IS
'Internal: the buckets of p_table (distributed by bucket on Citus) whose worker node cannot be reached now, with the node; none elsewhere.';

ALTER FUNCTION cronbox.unreachable_buckets(regclass) OWNER TO cronbox_owner;
REVOKE ALL ON FUNCTION cronbox.unreachable_buckets(regclass) FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
