-- 0469: outbox_queue_idx (queue, available_at) gains the row's key as its last column, (queue,
-- available_at, outbox_id), so that a pull worker's claim can start after the last key it took
-- (cronbox.claim_runs_at: a cursor kept in the worker's session) instead of walking again,
-- entry by entry with a heap fetch each, past the rows it and the other workers already
-- claimed. A claimed run's row is moved to available_at 'infinity', but its old entry stays in
-- the index until no snapshot can see the old row version: under a minute's burst of runs
-- sharing one available_at, every claim walked the whole burst claimed so far (a million
-- every-minute schedules: 57 buffers per run claimed, against 26 at 200,000). Every other
-- reader of the index (the relay's claim, the early runs' withdrawal) keeps its (queue,
-- available_at) prefix. Same name: the plans and docs naming it stay true.
DROP INDEX cronbox.outbox_queue_idx;
CREATE INDEX outbox_queue_idx ON cronbox.outbox (queue, available_at, outbox_id);
