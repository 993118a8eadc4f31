-- 0350 (Citus only, applied by `cronbox migrate --citus`): the buckets of the job.
-- cronbox.bucket_shard is the colocation group every bucketed table joins: distributed by
-- `bucket` over B shards (B = --buckets), one row per bucket, each in its own shard.
-- cronbox.bucket (a reference table: a copy on every node) lists the B bucket values, one per
-- shard: the smallest non-negative integer whose Citus hash falls into that shard's hash range,
-- so a shard holds exactly one bucket. `hash_min`/`hash_max` are the shard's range: a job's
-- group (its name up to the first `/`) is in the bucket whose range holds the group's hash
-- (cronbox.bucket_of). Both are filled, and distributed, by the migrate in the same
-- transaction; the count never changes afterwards (every job's bucket would).
CREATE TABLE cronbox.bucket (
    bucket_index integer NOT NULL CONSTRAINT bucket_index_key PRIMARY KEY
                 CONSTRAINT bucket_index_in_range CHECK (bucket_index BETWEEN 0 AND 1023),
    bucket       integer NOT NULL CONSTRAINT bucket_value_unique UNIQUE,
    hash_min     integer NOT NULL CONSTRAINT bucket_hash_min_unique UNIQUE,
    hash_max     integer NOT NULL,
    CONSTRAINT bucket_hash_range_ordered CHECK (hash_min <= hash_max)
);

CREATE TABLE cronbox.bucket_shard (
    bucket integer NOT NULL CONSTRAINT bucket_shard_key PRIMARY KEY
);
