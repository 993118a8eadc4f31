-- 0480: a one-off's statistics derived from its runs (docs/architecture.md, "A one-off's
-- statistics derived from its runs"). job_stat.stats_from_runs: true for a job whose statistics
-- dispatch and the finishing calls do not write (no change row, no update): the views derive
-- them from its runs when read (cronbox.job_stat_derived). Set when the job is made
-- (cronbox.add_job_rows: a one-off no policy reads), cleared for good when its statistics are
-- written into its row (cronbox.fold_job_stats_of). Every job that exists now stays folded.
-- dispatch_fire.derived carries the flag from dispatch's read to its write.
ALTER TABLE cronbox.job_stat ADD COLUMN stats_from_runs boolean NOT NULL DEFAULT false;
ALTER TYPE cronbox.dispatch_fire ADD ATTRIBUTE derived boolean;
