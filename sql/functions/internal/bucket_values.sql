-- cronbox.bucket_values(): the buckets of the job, in bucket-index order. On a database migrated
-- with `cronbox migrate --citus` (it has the buckets: cronbox.bucket, a reference table, read on
-- the node running the call), its B bucket values; on plain PostgreSQL the one bucket, 0. What a
-- walk over every bucket, one statement per bucket, visits (cronbox.claim_outbox without a
-- bucket).
CREATE OR REPLACE FUNCTION cronbox.bucket_values() RETURNS integer[]
LANGUAGE plpgsql STABLE
SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF to_regclass('cronbox.bucket') IS NULL THEN
        RETURN ARRAY[0];
    END IF;
    RETURN ARRAY(SELECT b.bucket FROM cronbox.bucket b ORDER BY b.bucket_index);
END
$$;

COMMENT ON FUNCTION cronbox.bucket_values() IS
'Internal: the buckets of the job in bucket-index order: cronbox.bucket''s values on Citus, {0} on plain PostgreSQL.';

ALTER FUNCTION cronbox.bucket_values() OWNER TO cronbox_owner;
REVOKE ALL ON FUNCTION cronbox.bucket_values() FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
