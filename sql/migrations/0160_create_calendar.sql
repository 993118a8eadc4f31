-- 0160: exclusion calendars and run limits.
-- cronbox.calendar: a named set of excluded local dates (single dates and date ranges) and
-- cron expressions in one time zone; a fire it matches is not dispatched but recorded
-- `skipped` (one row per excluded stretch of a saturation pass, like a missed gap).
-- cronbox.job_calendar links a job to the calendars it honours (schedule(exclude => ...)); a
-- calendar in use cannot be dropped (the foreign key has no cascade; drop_calendar says 55000).
-- Row security as for cronbox.job: a cronbox_user sees and uses only the calendars it owns.
-- job.max_runs: the schedule finishes after that many scheduled fires; job.fires_made counts
-- them (each scheduled fire stored as a future counts; manual runs, retries and excluded
-- fires do not; counted from this migration on).
CREATE TABLE cronbox.calendar (
    calendar_id bigint GENERATED ALWAYS AS IDENTITY CONSTRAINT calendar_pkey PRIMARY KEY,
    name        text NOT NULL CONSTRAINT calendar_name_unique UNIQUE
                CONSTRAINT calendar_name_length CHECK (length(name) BETWEEN 1 AND 200),
    timezone    text NOT NULL,
    dates       date[] NOT NULL DEFAULT '{}',
    ranges      daterange[] NOT NULL DEFAULT '{}',
    crons       text[] NOT NULL DEFAULT '{}',  -- normal forms (cronbox.normalize_cron)
    owner       name NOT NULL DEFAULT cronbox.caller(),
    created_at  timestamptz NOT NULL,
    updated_at  timestamptz NOT NULL
);

CREATE TABLE cronbox.job_calendar (
    job_id      bigint NOT NULL REFERENCES cronbox.job (job_id) ON DELETE CASCADE,
    calendar_id bigint NOT NULL REFERENCES cronbox.calendar (calendar_id),
    CONSTRAINT job_calendar_pkey PRIMARY KEY (job_id, calendar_id)
);
-- drop_calendar's "in use?" and the jobs to recompute when a calendar changes.
CREATE INDEX job_calendar_calendar_idx ON cronbox.job_calendar (calendar_id);

ALTER TABLE cronbox.job
    ADD COLUMN max_runs integer CONSTRAINT job_max_runs_positive CHECK (max_runs > 0),
    -- the exclude argument as given (schedule option); cronbox.job_calendar holds the links
    ADD COLUMN exclude text,
    ADD COLUMN fires_made bigint NOT NULL DEFAULT 0,
    -- the `skipped` history row of the job's current excluded stretch, extended by the next
    -- saturation pass while the exclusion goes on (NULL: the last fire was not excluded)
    ADD COLUMN excluded_run_id bigint;

ALTER TABLE cronbox.calendar ENABLE ROW LEVEL SECURITY;
ALTER TABLE cronbox.calendar FORCE ROW LEVEL SECURITY;
CREATE POLICY calendar_read ON cronbox.calendar FOR SELECT
    USING ((SELECT cronbox.caller_reads_all()) OR owner = (SELECT cronbox.caller()));
CREATE POLICY calendar_insert ON cronbox.calendar FOR INSERT
    WITH CHECK ((SELECT cronbox.caller_writes_all()) OR owner = (SELECT cronbox.caller()));
CREATE POLICY calendar_update ON cronbox.calendar FOR UPDATE
    USING ((SELECT cronbox.caller_writes_all()) OR owner = (SELECT cronbox.caller()))
    WITH CHECK ((SELECT cronbox.caller_writes_all()) OR owner = (SELECT cronbox.caller()));
CREATE POLICY calendar_delete ON cronbox.calendar FOR DELETE
    USING ((SELECT cronbox.caller_writes_all()) OR owner = (SELECT cronbox.caller()));

-- Links belong to whoever owns the job (as cronbox.job_future's rows).
ALTER TABLE cronbox.job_calendar ENABLE ROW LEVEL SECURITY;
ALTER TABLE cronbox.job_calendar FORCE ROW LEVEL SECURITY;
CREATE POLICY job_calendar_read ON cronbox.job_calendar FOR SELECT
    USING ((SELECT cronbox.caller_reads_all())
           OR EXISTS (SELECT 1 FROM cronbox.job j WHERE j.job_id = job_calendar.job_id
                      AND j.owner = (SELECT cronbox.caller())));
CREATE POLICY job_calendar_write ON cronbox.job_calendar FOR ALL
    USING ((SELECT cronbox.caller_writes_all())
           OR EXISTS (SELECT 1 FROM cronbox.job j WHERE j.job_id = job_calendar.job_id
                      AND j.owner = (SELECT cronbox.caller())))
    WITH CHECK ((SELECT cronbox.caller_writes_all())
           OR EXISTS (SELECT 1 FROM cronbox.job j WHERE j.job_id = job_calendar.job_id
                      AND j.owner = (SELECT cronbox.caller())));
