-- 0311: a report that arrives after its run was final (a duplicate delivery, a worker whose run
-- was declared lost and retried, a report after a cancel) is kept in a table of its own,
-- cronbox.run_late_report, not by an update of the run's history row: history rows are written
-- and then left alone (docs/architecture.md, "One row in flight"), so a late report never takes
-- the lock of, or writes WAL for, a row of history, and a partition of history is append-only.
-- cronbox.runs shows it as before (late_report, joined by run id). The newest late report of a
-- run wins, as it did when it overwrote the column. Dropped with the run's history (retention
-- drops whole days: drop_run_partitions deletes the late reports of the days it drops).
CREATE TABLE cronbox.run_late_report (
    run_id  bigint PRIMARY KEY,
    report  jsonb NOT NULL
);

INSERT INTO cronbox.run_late_report (run_id, report)
SELECT r.run_id, r.late_report FROM cronbox.run r WHERE r.late_report IS NOT NULL;

DROP VIEW IF EXISTS cronbox.runs;  -- reads the column; `cronbox migrate` recreates it
ALTER TABLE cronbox.run DROP COLUMN late_report;

-- Only the owner's functions write it and the runs view reads it (no grant to any cronbox
-- role): a late report is seen with its run, by whoever may see the run. Row security like
-- every cronbox table, with a policy that costs nothing per statement.
ALTER TABLE cronbox.run_late_report ENABLE ROW LEVEL SECURITY;
ALTER TABLE cronbox.run_late_report FORCE ROW LEVEL SECURITY;
CREATE POLICY run_late_report_all ON cronbox.run_late_report USING (true) WITH CHECK (true);

COMMENT ON TABLE cronbox.run_late_report IS
    'Reports that arrived after their run was final (the newest per run), shown by cronbox.runs as late_report; the run''s history row is left alone.';
