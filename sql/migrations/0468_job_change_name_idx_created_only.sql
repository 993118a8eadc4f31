-- 0468: job_change_name_idx holds only the 'created' rows. Its one reader is the web console's
-- lookup of the ids a job name had (also after unschedule): `job = name AND action =
-- 'created'` (web/queries.py, web/history.py); the log by job is read through
-- job_change_job_idx. Every other change row (a one-off's 'finished', written by dispatch for
-- each such job; triggers, pauses, resumes) no longer writes an entry here: the change log's
-- rows other than 'created' cost 2 index entries, not 3.
DROP INDEX cronbox.job_change_name_idx;
CREATE INDEX job_change_name_idx ON cronbox.job_change (job_name, change_id DESC) WHERE action = 'created';
