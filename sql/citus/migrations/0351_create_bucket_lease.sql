-- 0351 (Citus only): bucket leases, no leader. One row per (process kind, bucket): the poller
-- or relay holding the bucket until `lease_until` (owner NULL: released). cronbox.bucket_member
-- lists the live processes of each kind (until `alive_until`, pushed forward at each lease
-- renewal): their number sets each one's share of the buckets. Both stay the coordinator's own
-- tables: one lease renewal is one local transaction, and a worker node down leaves the leases
-- of the buckets on the other nodes untouched. Written only by cronbox.lease_buckets and
-- cronbox.release_buckets; rows of bucket_lease are made with the buckets.
CREATE TABLE cronbox.bucket_lease (
    kind        text NOT NULL CONSTRAINT bucket_lease_kind_valid CHECK (kind IN ('poller', 'relay')),
    bucket      integer NOT NULL,
    owner       text,                   -- NULL: released (free at once)
    lease_until timestamptz NOT NULL DEFAULT '-infinity',  -- free once past
    CONSTRAINT bucket_lease_key PRIMARY KEY (kind, bucket)
);

CREATE TABLE cronbox.bucket_member (
    kind        text NOT NULL CONSTRAINT bucket_member_kind_valid CHECK (kind IN ('poller', 'relay')),
    owner       text NOT NULL,
    joined_at   timestamptz NOT NULL,
    alive_until timestamptz NOT NULL,
    CONSTRAINT bucket_member_key PRIMARY KEY (kind, owner)
);
