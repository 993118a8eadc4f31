-- 0475: a late report (cronbox.run_late_report) carries its run's bucket, as every other row of a
-- run does (migration 0390): on Citus the reports are distributed with the history they stand
-- beside, and cronbox.runs reads a run's report by (bucket, run_id), a join on the distribution
-- column that Citus pushes down to the shards. The finishing calls write the bucket of the history
-- row the report is about; the reports written before get theirs from history (bucket 0 on
-- plain PostgreSQL: nothing to do there).
ALTER TABLE cronbox.run_late_report ADD COLUMN bucket integer NOT NULL DEFAULT 0;

UPDATE cronbox.run_late_report l SET bucket = r.bucket
FROM cronbox.run r
WHERE r.run_id = l.run_id AND r.bucket <> 0;
