-- 0192: one index of the outbox for every claimer, (queue, available_at).
-- The relay claimed through outbox_claim_idx (available_at) and pull workers through
-- outbox_pull_idx (queue, available_at) WHERE kind = 'run', so every row took two entries. Now
-- the relay walks the queues too (cronbox.claim_outbox: the queues with rows, one index probe
-- each, then each queue's rows in available_at order), which also stops a queue it does not
-- claim (pulled, or a lane that is full or whose sink is down) from slowing its claims: their
-- rows used to sit at the head of outbox_claim_idx, read past by every claim.
-- One B-tree entry per outbox row less (bench.sqlcost: about 67 bytes of WAL per push run).
CREATE INDEX outbox_queue_idx ON cronbox.outbox (queue, available_at);
DROP INDEX cronbox.outbox_pull_idx;
DROP INDEX cronbox.outbox_claim_idx;
