-- 0150: per-minute run counts for the web console's overview (runs per minute, failures of
-- the last hour, the queues seen lately), so the overview reads a few thousand small rows
-- instead of every run of the last hours. Maintained OFF the hot path: nothing in dispatch,
-- complete or fail writes here; the poller's maintenance step (cronbox.tally_runs, every
-- minute) reads the runs created since its mark once, by primary key, and counts each
-- finished run (succeeded, failed, lost) at the minute it finished.
--   run_tally_mark     one row: runs with run_id >= next_run_id are not counted yet
--   run_tally_pending  runs that were unfinished when the tally read them: counted when they
--                      finish (looked up by primary key), forgotten if history drops them
--   run_minute         finished runs per (finish minute, queue, owner of the job), kept 2 days;
--                      owner '' = the job is gone (unscheduled): only administrators see it
CREATE TABLE cronbox.run_tally_mark (
    one          boolean PRIMARY KEY DEFAULT true CONSTRAINT run_tally_mark_single CHECK (one),
    next_run_id  bigint NOT NULL,
    tallied_at   timestamptz NOT NULL DEFAULT now()
);
-- The first tally starts three hours back (the overview's chart window): a few batches.
-- (cronbox.run_id_at's arithmetic: on a fresh database the functions come after migrations.)
INSERT INTO cronbox.run_tally_mark (next_run_id)
VALUES (floor(extract(epoch FROM now() - interval '3 hours') * 1000)::bigint << 20);

CREATE TABLE cronbox.run_tally_pending (
    run_id  bigint PRIMARY KEY
);

CREATE TABLE cronbox.run_minute (
    minute     timestamptz NOT NULL,
    queue      text NOT NULL,
    owner      name NOT NULL,
    succeeded  bigint NOT NULL DEFAULT 0,
    failed     bigint NOT NULL DEFAULT 0,   -- failed or lost
    CONSTRAINT run_minute_pkey PRIMARY KEY (minute, queue, owner)
);

-- Row security as on cronbox.run: an owner sees the counts of its own jobs' runs. The mark
-- and the pending ids hold no per-owner data (the views join them to cronbox.run, which is
-- filtered); they get row security only so that views over them may be granted to
-- cronbox_user (sql/grants.sql step 5). Only cronbox.tally_runs writes (as the owner).
ALTER TABLE cronbox.run_minute ENABLE ROW LEVEL SECURITY;
ALTER TABLE cronbox.run_minute FORCE ROW LEVEL SECURITY;
CREATE POLICY run_minute_read ON cronbox.run_minute FOR SELECT
    USING ((SELECT cronbox.caller_reads_all()) OR owner = (SELECT cronbox.caller()));
CREATE POLICY run_minute_insert ON cronbox.run_minute FOR INSERT
    WITH CHECK ((SELECT cronbox.caller_writes_all()));
CREATE POLICY run_minute_update ON cronbox.run_minute FOR UPDATE
    USING ((SELECT cronbox.caller_writes_all()));
CREATE POLICY run_minute_delete ON cronbox.run_minute FOR DELETE
    USING ((SELECT cronbox.caller_writes_all()));

ALTER TABLE cronbox.run_tally_mark ENABLE ROW LEVEL SECURITY;
ALTER TABLE cronbox.run_tally_mark FORCE ROW LEVEL SECURITY;
CREATE POLICY run_tally_mark_read ON cronbox.run_tally_mark FOR SELECT USING (true);
CREATE POLICY run_tally_mark_update ON cronbox.run_tally_mark FOR UPDATE
    USING ((SELECT cronbox.caller_writes_all()));

ALTER TABLE cronbox.run_tally_pending ENABLE ROW LEVEL SECURITY;
ALTER TABLE cronbox.run_tally_pending FORCE ROW LEVEL SECURITY;
CREATE POLICY run_tally_pending_read ON cronbox.run_tally_pending FOR SELECT USING (true);
CREATE POLICY run_tally_pending_insert ON cronbox.run_tally_pending FOR INSERT
    WITH CHECK ((SELECT cronbox.caller_writes_all()));
CREATE POLICY run_tally_pending_delete ON cronbox.run_tally_pending FOR DELETE
    USING ((SELECT cronbox.caller_writes_all()));
