-- 0171: cronbox.backfill(name, from, to). A call records a request here (and a
-- 'backfill' row in the change log); the poller materialises the request's fires as futures
-- of origin 'backfill' with the same fire code as saturation, in bounded passes, skipping the
-- fires that already ran or are pending, and marks the request done.
CREATE TABLE cronbox.backfill (
    backfill_id   bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    job_id        bigint NOT NULL REFERENCES cronbox.job (job_id) ON DELETE CASCADE,
    from_at       timestamptz NOT NULL,     -- first fire time included
    to_at         timestamptz NOT NULL,     -- last fire time included
    overlap       text NOT NULL CONSTRAINT backfill_overlap_valid
                      CHECK (overlap IN ('skip', 'buffer_one', 'buffer_all', 'allow', 'cancel_other')),
    priority      integer NOT NULL,
    requested_by  name NOT NULL DEFAULT cronbox.caller(),
    requested_at  timestamptz NOT NULL,
    -- Progress: fires up to done_through are handled (NULL: none yet). The poller only
    -- handles fires its saturation already passed (<= job.frontier), so a fire is never
    -- materialised by both; fires beyond the frontier wait (a paused job: until resumed).
    done_through  timestamptz,
    fires         integer NOT NULL DEFAULT 0,   -- materialised as futures
    duplicates    integer NOT NULL DEFAULT 0,   -- not materialised: already ran or pending
    done_at       timestamptz,                  -- NULL: pending
    outcome       text,
    CONSTRAINT backfill_range_valid CHECK (from_at < to_at)
);
-- Serves cronbox.claim_backfills: pending requests, oldest first (done ones leave the index).
CREATE INDEX backfill_pending_idx ON cronbox.backfill (backfill_id) WHERE done_at IS NULL;
CREATE INDEX backfill_job_idx ON cronbox.backfill (job_id);

-- A row belongs to whoever owns its job (as job_future, 0040).
ALTER TABLE cronbox.backfill ENABLE ROW LEVEL SECURITY;
ALTER TABLE cronbox.backfill FORCE ROW LEVEL SECURITY;
CREATE POLICY backfill_read ON cronbox.backfill FOR SELECT
    USING ((SELECT cronbox.caller_reads_all())
           OR EXISTS (SELECT 1 FROM cronbox.job j WHERE j.job_id = backfill.job_id
                      AND j.owner = (SELECT cronbox.caller())));
CREATE POLICY backfill_insert ON cronbox.backfill FOR INSERT WITH CHECK (true);
CREATE POLICY backfill_change ON cronbox.backfill FOR UPDATE
    USING ((SELECT cronbox.caller_writes_all())
           OR EXISTS (SELECT 1 FROM cronbox.job j WHERE j.job_id = backfill.job_id
                      AND j.owner = (SELECT cronbox.caller())));
CREATE POLICY backfill_delete ON cronbox.backfill FOR DELETE
    USING ((SELECT cronbox.caller_writes_all()));

-- Backfilled fires are futures (and runs) of origin 'backfill'; overlap, when set, overrides
-- the job's policy for that future (dispatch reads coalesce(future.overlap, job.overlap)).
ALTER TABLE cronbox.job_future DROP CONSTRAINT job_future_origin_valid;
ALTER TABLE cronbox.job_future ADD CONSTRAINT job_future_origin_valid
    CHECK (origin IN ('schedule', 'manual', 'retry', 'dependency', 'backfill'));
ALTER TABLE cronbox.job_future ADD COLUMN overlap text CONSTRAINT job_future_overlap_valid
    CHECK (overlap IN ('skip', 'buffer_one', 'buffer_all', 'allow', 'cancel_other'));

ALTER TABLE cronbox.job_change DROP CONSTRAINT job_change_action_valid;
ALTER TABLE cronbox.job_change ADD CONSTRAINT job_change_action_valid CHECK (action IN (
    'created', 'updated', 'paused', 'resumed', 'unscheduled', 'triggered',
    'paused_after_failure', 'finished', 'quarantined', 'backfill'));
