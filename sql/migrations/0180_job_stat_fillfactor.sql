-- 0180: more room on every page of cronbox.job_stat. A batch of dispatch updates
-- every statistics row of a page at once, and so does the batch of reports that follows; at
-- fillfactor 50 the second versions of a whole page's rows (~95 bytes each) just did not fit:
-- bench.sqlcost measured 30 % of dispatch's job_stat updates non-HOT (a new job_stat_pkey
-- entry each, and page splits of that index). At 30 a page holds ~25 rows and room for two new
-- versions of each (dispatch, then the report); the table stays small (one ~95-byte row per job:
-- 100,000 jobs ~ 32 MB). Measured: 35 left 5 % of the reports' updates non-HOT, 30 and 25 none.
-- Applies to pages filled from now on (VACUUM FULL or pg_repack rewrites existing ones).
ALTER TABLE cronbox.job_stat SET (fillfactor = 30);
