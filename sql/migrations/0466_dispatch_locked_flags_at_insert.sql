-- 0466: cronbox.dispatch_locked and cronbox.dispatch_plain under it take the jobs whose early
-- runs are claimable only from their due time (p_claim_at_due) and flag those runs as they insert
-- them: early dispatch set the flag by an update after the insert, which since
-- outbox_flagged_idx (0465) is no longer heap-only. The function files create the new
-- signatures; the old ones go.
DROP FUNCTION IF EXISTS cronbox.dispatch_locked(bigint[], bigint[], interval, timestamptz, integer[]);
DROP FUNCTION IF EXISTS cronbox.dispatch_plain(bigint[], interval, timestamptz, integer[]);
