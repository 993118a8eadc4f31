-- 0364 (Citus only, with --distribute, after 0356 and core 0490): a job's calendar links
-- (cronbox.job_calendar, the coordinator's own) are read and changed by a caller limited to its
-- own schedules when it owns their job, as on one primary, where 0356 let through only the
-- callers that read or write every schedule's rows (one primary's policies read the job in a
-- subquery, which Citus refuses over the distributed jobs). The owner is checked as on the
-- other rows of a job (0357): cronbox.caller_owns_job(bucket, job_id), a read of the job by its
-- key in its bucket.
ALTER POLICY job_calendar_read ON cronbox.job_calendar
    USING (cronbox.caller_reads_all() OR cronbox.caller_owns_job(bucket, job_id));
ALTER POLICY job_calendar_write ON cronbox.job_calendar
    USING (cronbox.caller_writes_all() OR cronbox.caller_owns_job(bucket, job_id))
    WITH CHECK (cronbox.caller_writes_all() OR cronbox.caller_owns_job(bucket, job_id));
