-- 0392: a job's notification reaches the job's own recipients (job.notify) through
-- cronbox.notify_stakeholders(ids), called by the functions that insert notifications
-- (dispatch, the finishing calls, quarantine, redrive) with the ids they inserted, instead of a
-- row trigger on cronbox.outbox: Citus distributes no table with triggers (docs/citus.md).
-- Same messages, digests and windows.
DROP TRIGGER IF EXISTS outbox_notify_stakeholders ON cronbox.outbox;
DROP FUNCTION IF EXISTS cronbox.notify_stakeholders();
