-- 0270: resource pools. A pool has a capacity in units (GPUs, IPs, licences); a job that
-- `needs` units of pools is dispatched only while they fit (cronbox.set_pool, docs/runs.md,
-- "Resource pools"). What a fire does when they do not fit is the job's `on_unavailable`:
-- wait (held, hold = 'pool', in priority order, at most `unavailable_timeout`), retry (put
-- back after the retry delay) or fail (a failed run and a notification). `notify`: the job's
-- own recipients of its events (mailto: and https: addresses), besides cronbox.notifications.
--
--   pool             capacity and the units held by runs in flight (in_use), kept under the
--                    row's lock by dispatch and the finishing functions, recounted by
--                    cronbox.reconcile_pools
--   run.needs        the units a run took at dispatch: what its end gives back, whatever the
--                    job's definition says by then (NULL for runs of jobs without needs)
--   job_future.hold  'pool': waiting for units; hold_queue names the pool it waits on
--   cronbox_capacity a role for the infrastructure's monitor: set_pool and the pools view only

DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_roles WHERE rolname = 'cronbox_capacity') THEN
        BEGIN
            CREATE ROLE cronbox_capacity NOLOGIN;
        EXCEPTION
            WHEN duplicate_object THEN NULL;  -- another database of this cluster migrating now
            WHEN insufficient_privilege THEN
                RAISE EXCEPTION 'roles: cannot create role cronbox_capacity (the migrating role needs CREATEROLE)'
                    USING ERRCODE = 'insufficient_privilege',
                          HINT = 'ask a superuser to run: CREATE ROLE cronbox_capacity NOLOGIN;';
        END;
    END IF;
END
$$;
GRANT USAGE ON SCHEMA cronbox TO cronbox_capacity;

CREATE TABLE cronbox.pool (
    name        text PRIMARY KEY,
    capacity    integer NOT NULL CONSTRAINT pool_capacity_valid CHECK (capacity BETWEEN 0 AND 1000000000),
    -- Units held by unfinished runs (dispatched, delivered, running): added by dispatch, given
    -- back once by the finishing functions, under this row's lock. May exceed capacity after
    -- the capacity was lowered (the runs keep their units until they end).
    in_use      bigint NOT NULL DEFAULT 0 CONSTRAINT pool_in_use_nonnegative CHECK (in_use >= 0),
    updated_at  timestamptz NOT NULL DEFAULT now(),
    updated_by  text NOT NULL DEFAULT current_user
);

ALTER TABLE cronbox.job
    ADD COLUMN needs jsonb,
    ADD COLUMN on_unavailable text NOT NULL DEFAULT 'wait'
        CONSTRAINT job_on_unavailable_valid CHECK (on_unavailable IN ('wait', 'retry', 'fail')),
    ADD COLUMN unavailable_timeout interval
        CONSTRAINT job_unavailable_timeout_positive CHECK (unavailable_timeout > interval '0'),
    ADD COLUMN notify text[];

ALTER TABLE cronbox.run ADD COLUMN needs jsonb;

ALTER TABLE cronbox.job_future DROP CONSTRAINT job_future_hold_valid;
ALTER TABLE cronbox.job_future ADD CONSTRAINT job_future_hold_valid
    CHECK (hold IN ('paused', 'overlap', 'dependency', 'queue_limit', 'pool'));
-- Fires waiting for a pool's units, released in priority order as units free.
CREATE INDEX job_future_pool_held_idx ON cronbox.job_future (hold_queue, priority, due_at)
    WHERE hold = 'pool';
