-- 0352 (Citus only): a bucket's lease lasts as long as its owner is a live member
-- (cronbox.bucket_member.alive_until), so a renewal writes one row, the member's, instead of
-- one per bucket held (1,024 row updates every few seconds for a process holding 1,024
-- buckets). bucket_lease keeps who holds each bucket and since when (`held_since`, set when
-- taken); a process's own rows are found by index; owner changes only when a bucket is taken
-- or released.
DROP VIEW IF EXISTS cronbox.buckets;  -- recreated by the migrate, without lease_until
ALTER TABLE cronbox.bucket_lease DROP COLUMN lease_until;
ALTER TABLE cronbox.bucket_lease ADD COLUMN held_since timestamptz;
CREATE INDEX bucket_lease_owner_idx ON cronbox.bucket_lease (kind, owner);
