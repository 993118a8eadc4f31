-- cronbox.bucket_walks(p_table, p_bucket): how a walk over every bucket of a hot table goes, one statement
-- per row of the 2-D result, each statement filtering `bucket = ANY (that row)`. On a table
-- Citus distributes by bucket (a shard per bucket), one row per bucket, in bucket-index order:
-- each statement is one task on one shard. Anywhere else one row with every bucket: one
-- statement, the filter true of every row (plain PostgreSQL: {{0}}, its one bucket; a database
-- migrated with --citus whose hot tables are still the coordinator's own: the B bucket values,
-- 0 among them, as every bucket value is the smallest non-negative integer hashing into its
-- shard), so no walk over an index that does not lead with the bucket is repeated per bucket.
-- p_bucket: a caller's bucket; when given, the one set {{p_bucket}} (a negative one is refused
-- with 22023 naming it: buckets are 0 or more, docs/sql.md), so every per-bucket function
-- checks and walks the same way.
CREATE OR REPLACE FUNCTION cronbox.bucket_walks(p_table regclass, p_bucket integer DEFAULT NULL) RETURNS integer[]
LANGUAGE plpgsql STABLE
SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF p_bucket < 0 THEN
        RAISE EXCEPTION 'p_bucket: must be NULL or a bucket (0 or more), got %', p_bucket
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_bucket IS NOT NULL THEN
        RETURN ARRAY[ARRAY[p_bucket]];
    END IF;
    IF to_regclass('cronbox.bucket') IS NULL THEN
        RETURN ARRAY[ARRAY[0]];
    END IF;
    IF EXISTS (SELECT 1 FROM pg_catalog.pg_dist_partition p WHERE p.logicalrelid = p_table AND p.partmethod = 'h') THEN
        RETURN ARRAY(SELECT ARRAY[b.bucket] FROM cronbox.bucket b ORDER BY b.bucket_index);
    END IF;
    RETURN ARRAY[ARRAY(SELECT b.bucket FROM cronbox.bucket b ORDER BY b.bucket_index)];
END
$$;

COMMENT ON FUNCTION cronbox.bucket_walks(regclass, integer) IS
'Internal: the bucket sets a walk over every bucket of p_table visits, one statement each (2-D, a row per set): one bucket per row where Citus distributes the table by bucket, one row of every bucket elsewhere ({{0}} on plain PostgreSQL); {{p_bucket}} when a bucket is given (negative: 22023).';

ALTER FUNCTION cronbox.bucket_walks(regclass, integer) OWNER TO cronbox_owner;
REVOKE ALL ON FUNCTION cronbox.bucket_walks(regclass, integer) FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
