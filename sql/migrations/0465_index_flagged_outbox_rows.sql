-- 0465: the outbox rows flagged claim_at_due (early 'skip' runs, claimable only from their due
-- time) get an index of their own, so that what must know where they are finds them by a probe
-- instead of walking past them: a relay's claim looking ahead stops before a queue's first
-- flagged row due ahead (cronbox.claim_outbox_at; a minute's burst of a million early 'skip'
-- runs under one due time was walked whole by every claim within the lead of it), and
-- cronbox.next_claim_at_due and the withdrawal's probe (cronbox.withdraw_early_skip_runs) ask
-- the index. Partial: no other row has an entry, so the runs of every other flow pay nothing;
-- an early 'skip' run's flag is set by an update that is no longer heap-only (a few index
-- entries more for those runs alone).
CREATE INDEX outbox_flagged_idx ON cronbox.outbox (queue, available_at) WHERE claim_at_due;
