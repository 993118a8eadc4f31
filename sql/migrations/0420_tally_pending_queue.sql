-- 0420: a run the tally saw unfinished is remembered with its queue too (cronbox.run_tally_pending
-- gets queue), so that finding it finished names the first column of every index of history
-- that holds run_id: the primary key (run_id), run_job_history_idx (job_id, run_id) and
-- run_queue_history_idx (queue, run_id). A partition analysed while it held no live row (a
-- density of zero) costs every index the same, and 0400's probe by (run_id, job_id) could
-- still be planned on run_queue_history_idx: a scan of that whole index per pending run.
-- A run's queue is the one it was dispatched to, the same in its outbox row and its history
-- row. Rows of runs found in neither (nothing left to count) are dropped.
ALTER TABLE cronbox.run_tally_pending ADD COLUMN queue text;

UPDATE cronbox.run_tally_pending p SET queue = o.queue
FROM cronbox.outbox o WHERE o.outbox_id = p.run_id AND o.kind = 'run';

UPDATE cronbox.run_tally_pending p SET queue = r.queue
FROM cronbox.run r WHERE r.run_id = p.run_id AND p.queue IS NULL;

DELETE FROM cronbox.run_tally_pending WHERE queue IS NULL;

ALTER TABLE cronbox.run_tally_pending ALTER COLUMN queue SET NOT NULL;

COMMENT ON COLUMN cronbox.run_tally_pending.queue IS
'The run''s queue: a finished run is looked up in history by (run_id, job_id, queue), every index holding run_id then has its first column named.';
