-- 0382: the tally looks at the runs it saw unfinished (cronbox.run_tally_pending) a bounded
-- chunk at a time, in run id order from where the previous call stopped, instead of all of them
-- against every unfinished run on each call: with a hundred thousand runs in flight (a burst,
-- relays behind) one call read them all, 1.4-2.8 s in one transaction.
ALTER TABLE cronbox.run_tally_mark ADD COLUMN pending_after bigint NOT NULL DEFAULT 0;

COMMENT ON COLUMN cronbox.run_tally_mark.pending_after IS
'The last pending run the previous tally looked at (0: start from the first): the next tally looks at the pending runs after it, at most its batch, and starts again from the first when it reaches the end.';
