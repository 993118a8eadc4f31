-- 0391: the work of cronbox.job's statement triggers moves into the functions that write jobs:
-- cronbox.add_job_rows (each new job's saturation state and statistics, owners' schedule
-- counts), called by schedule(), and unschedule() (owners' counts, the name-search row). Citus
-- distributes no table with triggers, makes no reference table of one, and, told to allow them
-- (citus.enable_unsafe_triggers), fails every insert through a statement trigger with a
-- transition table (docs/citus.md). Same rows, same counts, on plain PostgreSQL too.
DROP TRIGGER IF EXISTS job_add_fire ON cronbox.job;
DROP TRIGGER IF EXISTS job_add_stat ON cronbox.job;
DROP TRIGGER IF EXISTS job_count_added ON cronbox.job;
DROP TRIGGER IF EXISTS job_count_removed ON cronbox.job;
DROP TRIGGER IF EXISTS job_forget_names ON cronbox.job;
DROP FUNCTION IF EXISTS cronbox.add_job_fire();
DROP FUNCTION IF EXISTS cronbox.add_job_stat();
DROP FUNCTION IF EXISTS cronbox.count_owner_schedules();
DROP FUNCTION IF EXISTS cronbox.forget_schedule_names();
