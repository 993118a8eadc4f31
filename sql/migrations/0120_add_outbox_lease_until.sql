-- 0120: the relay's lease on an outbox row moves out of the claim index.
-- Until now a claim pushed available_at (indexed twice: outbox_claim_idx, outbox_pull_idx) to
-- the lease end, so every claim was a non-HOT update: a new heap tuple with the whole message
-- and three new index entries (~570 WAL bytes per run). The lease now lives in lease_until, a
-- column no index covers: a claim changes lease_owner, lease_until and attempts only, so it is
-- a HOT update (the outbox keeps fillfactor 70 for the room), and available_at keeps the row's
-- place in the claim order (a row handed back or whose lease ran out is claimable again at
-- its old place). A row is claimable when available_at <= now() and no lease covers now.
ALTER TABLE cronbox.outbox ADD COLUMN lease_until timestamptz;
-- Rows leased the old way (available_at = lease end) stay claimable after that time: no
-- rewrite needed; their available_at keeps them out of reach until then.
COMMENT ON COLUMN cronbox.outbox.lease_until IS
    'End of the relay''s lease (cronbox.claim_outbox); NULL or past: no relay holds the row. Not indexed, so a claim is a HOT update.';
COMMENT ON COLUMN cronbox.outbox.available_at IS
    'When the row may be claimed (its due time, or the end of a send''s backoff). A claim leaves it alone (the lease is lease_until).';
