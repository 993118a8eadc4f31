-- 0400: a run the tally saw unfinished is remembered with its job (cronbox.run_tally_pending
-- gets job_id), so that finding it finished is a probe by both keys of history: by the
-- primary key (run_id) or by run_job_history_idx (job_id, run_id), whichever the planner
-- takes. With the run id alone, a partition analysed while it held no live row costs every
-- index the same, and the planner could take run_job_history_idx, whose first column the
-- probe did not name: a scan of the whole index per pending run (40,000 runs: 30 s).
-- Rows of runs found in neither the outbox nor history (nothing left to count) are dropped.
ALTER TABLE cronbox.run_tally_pending ADD COLUMN job_id bigint;

UPDATE cronbox.run_tally_pending p SET job_id = o.job_id
FROM cronbox.outbox o WHERE o.outbox_id = p.run_id AND o.kind = 'run';

UPDATE cronbox.run_tally_pending p SET job_id = r.job_id
FROM cronbox.run r WHERE r.run_id = p.run_id AND p.job_id IS NULL;

DELETE FROM cronbox.run_tally_pending WHERE job_id IS NULL;

ALTER TABLE cronbox.run_tally_pending ALTER COLUMN job_id SET NOT NULL;

COMMENT ON COLUMN cronbox.run_tally_pending.job_id IS
'The run''s job: a finished run is looked up in history by (job_id, run_id), one index descent whichever index the planner takes.';
