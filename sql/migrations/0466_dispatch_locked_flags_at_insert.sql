-- 0466: cronbox.dispatch_locked and cronbox.dispatch_plain under it take the jobs whose early
-- runs are claimable only from their due time (p_claim_at_due) and flag those runs as they insert
-- them: early dispatch set the flag by an update after the insert, which since
-- outbox_flagged_idx (0465) is no longer heap-only. Their old signatures are dropped by
-- sql/drop_old_signatures.sql, in the transaction that creates the new ones (a drop here would
-- leave the running processes without the function until the function files are re-applied).
-- Nothing left to do here.
SELECT 1;
