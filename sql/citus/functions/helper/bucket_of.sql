-- cronbox.bucket_of(name) (Citus only): the bucket of a job. A job's group is its name up to
-- the first `/` (the whole name when it has none): `etl/extract` and `etl/load` share `etl`'s
-- bucket. The group is hashed as Citus hashes a text value, and its bucket is the one whose
-- shard's hash range holds that hash (cronbox.bucket), so groups spread over the buckets as
-- evenly as Citus spreads text keys over shards. One index probe of the reference table
-- cronbox.bucket (a copy on every node); no lock, no write.
CREATE OR REPLACE FUNCTION cronbox.bucket_of(name text) RETURNS integer
LANGUAGE plpgsql STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_bucket integer;
BEGIN
    IF name IS NULL THEN
        RAISE EXCEPTION 'name: must not be NULL' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    SELECT b.bucket INTO v_bucket
    FROM cronbox.bucket b
    WHERE b.hash_min <= worker_hash(split_part(name, '/', 1))
    ORDER BY b.hash_min DESC
    LIMIT 1;
    IF v_bucket IS NULL THEN
        RAISE EXCEPTION 'cronbox.bucket is empty: run `cronbox migrate --citus`'
            USING ERRCODE = 'object_not_in_prerequisite_state';
    END IF;
    RETURN v_bucket;
END
$$;

COMMENT ON FUNCTION cronbox.bucket_of(text) IS
'Citus: the bucket of the job with this name (its group: the name up to the first "/"), as placed by cronbox.bucket. 22004 for NULL.';

ALTER FUNCTION cronbox.bucket_of(text) OWNER TO cronbox_owner;
REVOKE ALL ON FUNCTION cronbox.bucket_of(text) FROM PUBLIC, cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
GRANT EXECUTE ON FUNCTION cronbox.bucket_of(text) TO cronbox_admin, cronbox_user, cronbox_worker, cronbox_reader, cronbox_process;
