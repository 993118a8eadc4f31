-- 0001: the four tables of the pipeline.
--   job         definitions + the saturation frontier (one row per schedule)
--   job_future  materialised upcoming fires (hot, small: rows leave when dispatched)
--   run         history, one row per attempt, partitioned by time through run_id
--   outbox      messages waiting for the relay (hot, small: rows leave when acked)
-- The schema itself and cronbox.schema_version are created by the migrator.

CREATE TABLE cronbox.job (
    job_id              bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    name                text NOT NULL CONSTRAINT job_name_unique UNIQUE,
    owner               name NOT NULL DEFAULT current_user,
    kind                text NOT NULL CONSTRAINT job_kind_valid
                            CHECK (kind IN ('cron', 'every', 'at', 'after')),
    cron                text,            -- the expression as the user wrote it
    cron_normalized     text,            -- 7-field canonical form (cronbox.normalize_cron)
    every               interval,
    anchor              timestamptz,     -- every: fires at anchor + k*every (fixed rate)
    every_mode          text NOT NULL DEFAULT 'fixed_rate' CONSTRAINT job_every_mode_valid
                            CHECK (every_mode IN ('fixed_rate', 'fixed_delay')),
    at                  timestamptz,
    after               text[],
    timezone            text NOT NULL DEFAULT 'UTC',
    payload             jsonb NOT NULL DEFAULT '{}',
    queue               text NOT NULL DEFAULT 'default',
    priority            integer NOT NULL DEFAULT 0,
    overlap             text NOT NULL DEFAULT 'skip' CONSTRAINT job_overlap_valid
                            CHECK (overlap IN ('skip', 'buffer_one', 'buffer_all', 'allow', 'cancel_other')),
    on_error            text NOT NULL DEFAULT 'retry_schedule' CONSTRAINT job_on_error_valid
                            CHECK (on_error IN ('retry_schedule', 'retry_soon', 'pause')),
    max_attempts        integer NOT NULL DEFAULT 1 CONSTRAINT job_max_attempts_positive CHECK (max_attempts >= 1),
    retry_delay         interval NOT NULL DEFAULT '10 seconds',
    retry_max_delay     interval NOT NULL DEFAULT '1 hour',
    timeout             interval NOT NULL DEFAULT '5 minutes',
    catchup             text NOT NULL DEFAULT 'latest' CONSTRAINT job_catchup_valid
                            CHECK (catchup IN ('skip', 'latest', 'all')),
    catchup_window      interval NOT NULL DEFAULT '1 day',
    jitter              interval NOT NULL DEFAULT '0',
    starts_at           timestamptz,
    ends_at             timestamptz,
    paused              boolean NOT NULL DEFAULT false,
    paused_reason       text,
    finished_at         timestamptz,     -- set when no fire is left (one-off done, ends_at passed)
    -- Saturation frontier: every fire <= frontier is materialised (or recorded as missed);
    -- next_fire is a lower bound of the first fire > frontier (exact once the poller computed
    -- it). NULL next_fire = nothing to materialise (finished, or fired by dependencies).
    frontier            timestamptz,
    next_fire           timestamptz,
    definition_version  integer NOT NULL DEFAULT 1,
    -- Run bookkeeping, maintained by the dispatch and worker functions.
    active_runs         integer NOT NULL DEFAULT 0 CONSTRAINT job_active_runs_nonnegative CHECK (active_runs >= 0),
    consecutive_failures integer NOT NULL DEFAULT 0,
    consecutive_crashes integer NOT NULL DEFAULT 0,
    missed_count        bigint NOT NULL DEFAULT 0,
    last_fire_at        timestamptz,
    last_run_id         bigint,
    last_run_state      text,
    last_success_at     timestamptz,
    created_at          timestamptz NOT NULL DEFAULT now(),
    updated_at          timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT job_name_valid CHECK (length(name) BETWEEN 1 AND 200),
    CONSTRAINT job_window_valid CHECK (ends_at IS NULL OR starts_at IS NULL OR ends_at > starts_at)
);

-- Serves the poller's saturation claim: jobs whose next fire is inside the horizon.
-- Paused and finished jobs have next_fire NULL or are filtered, so an idle tick reads nothing.
CREATE INDEX job_saturate_idx ON cronbox.job (next_fire)
    WHERE next_fire IS NOT NULL AND NOT paused;

CREATE TABLE cronbox.job_future (
    future_id   bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    job_id      bigint NOT NULL REFERENCES cronbox.job (job_id) ON DELETE CASCADE,
    fire_at     timestamptz NOT NULL,        -- logical fire time (what the schedule said)
    due_at      timestamptz NOT NULL,        -- when it may go: fire_at + jitter, or retry backoff
    priority    integer NOT NULL DEFAULT 0,
    attempt     integer NOT NULL DEFAULT 1,
    origin      text NOT NULL DEFAULT 'schedule' CONSTRAINT job_future_origin_valid
                    CHECK (origin IN ('schedule', 'manual', 'retry', 'dependency')),
    payload     jsonb,                       -- overrides job.payload (trigger(payload => ...))
    retry_of    bigint,                      -- run_id of the failed attempt this retries
    held_since  timestamptz,                 -- first time dispatch held it back
    -- Why dispatch holds it back (NULL = ready: goes when due). Held futures leave the ready
    -- index, so a backlog waiting on a limit is not re-read by every dispatch; they are
    -- released when what they wait for happens (a run finishes, an upstream succeeds,
    -- resume), and re-examined at hold_until whatever happens (the backstop).
    hold        text CONSTRAINT job_future_hold_valid
                    CHECK (hold IN ('paused', 'overlap', 'dependency', 'queue_limit')),
    hold_queue  text,                        -- hold = 'queue_limit': the queue it waits on
    hold_until  timestamptz,                 -- re-examine a held future at this time
    created_at  timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT job_future_fire_unique UNIQUE (job_id, fire_at, attempt, origin)
) WITH (fillfactor = 80);

-- Serves cronbox.dispatch: ready futures, walked priority by priority in due order (a loose
-- scan over priorities, then a range of due rows per priority), so "lower priority first"
-- holds however many are due, without reading rows that are not due.
CREATE INDEX job_future_ready_idx ON cronbox.job_future (priority, due_at) WHERE hold IS NULL;
-- Held futures per job (overlap buffer, resume, dependency release) and per limited queue.
CREATE INDEX job_future_held_idx ON cronbox.job_future (job_id, fire_at) WHERE hold IS NOT NULL;
CREATE INDEX job_future_queue_held_idx ON cronbox.job_future (hold_queue, priority, due_at)
    WHERE hold = 'queue_limit';
-- The backstop: held futures due for a second look (cronbox.release_holds).
CREATE INDEX job_future_recheck_idx ON cronbox.job_future (hold_until) WHERE hold IS NOT NULL;

-- Run ids encode their creation time (milliseconds << 20 | sequence), so history can be
-- partitioned by time while every lookup by run_id prunes to one partition.
CREATE SEQUENCE cronbox.run_id_seq AS bigint CYCLE CACHE 100;

CREATE TABLE cronbox.run (
    run_id          bigint NOT NULL,
    job_id          bigint NOT NULL,          -- no FK: history outlives unschedule()
    job_name        text NOT NULL,
    queue           text NOT NULL,
    fire_at         timestamptz NOT NULL,     -- logical fire time
    due_at          timestamptz,
    state           text NOT NULL CONSTRAINT run_state_valid CHECK (state IN (
                        'dispatched',  -- in the outbox, not yet handed to a worker
                        'delivered',   -- dispatched -> delivered: the sink accepted it
                        'running',     -- delivered/dispatched -> running: start_run or claim_runs
                        'succeeded',   -- -> succeeded: complete_run
                        'failed',      -- -> failed: fail_run, or undeliverable, or dependency timeout
                        'lost',        -- -> lost: lease expired (a crash)
                        'cancelled',   -- -> cancelled: cancel() acknowledged
                        'skipped',     -- never ran: overlap policy
                        'missed')),    -- never ran: catch-up policy dropped it
    attempt         integer NOT NULL DEFAULT 1,
    origin          text NOT NULL DEFAULT 'schedule',
    retry_of        bigint,
    payload         jsonb,
    priority        integer NOT NULL DEFAULT 0,
    created_at      timestamptz NOT NULL DEFAULT now(),
    dispatched_at   timestamptz,
    delivered_at    timestamptz,
    started_at      timestamptz,
    finished_at     timestamptz,
    lease_until     timestamptz,              -- hard timeout; heartbeat extends it
    worker          text,
    cancel_requested boolean NOT NULL DEFAULT false,
    result          jsonb,
    error           text,
    late_report     jsonb,                    -- a report that arrived after the run was superseded
    PRIMARY KEY (run_id)
) PARTITION BY RANGE (run_id);

-- Unfinished runs per job (overlap) and per queue (limits); small because finished runs leave it.
CREATE INDEX run_active_job_idx ON cronbox.run (job_id)
    WHERE state IN ('dispatched', 'delivered', 'running');
-- The reaper: leases that can expire.
CREATE INDEX run_lease_idx ON cronbox.run (lease_until)
    WHERE state IN ('delivered', 'running');
-- History per job, newest first (views, dependencies).
CREATE INDEX run_job_history_idx ON cronbox.run (job_id, run_id DESC);

CREATE TABLE cronbox.outbox (
    outbox_id       bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    run_id          bigint,                   -- NULL for notifications
    queue           text NOT NULL,
    kind            text NOT NULL DEFAULT 'run' CONSTRAINT outbox_kind_valid
                        CHECK (kind IN ('run', 'notification')),
    message         jsonb NOT NULL,
    timeout         interval NOT NULL DEFAULT '5 minutes',  -- the run's lease once delivered
    created_at      timestamptz NOT NULL DEFAULT now(),
    -- A row is claimable when available_at <= now(). Claiming pushes available_at to the end
    -- of the lease; a failed send pushes it to the backoff time. One column, one index.
    available_at    timestamptz NOT NULL DEFAULT now(),
    lease_owner     text,
    attempts        integer NOT NULL DEFAULT 0,
    last_error      text
) WITH (fillfactor = 70);

-- Serves cronbox.claim_outbox.
CREATE INDEX outbox_claim_idx ON cronbox.outbox (available_at);

-- Who changed which schedule, when and why (view cronbox.schedule_changes).
CREATE TABLE cronbox.job_change (
    change_id   bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    job_id      bigint NOT NULL,              -- no FK: the log outlives unschedule()
    job_name    text NOT NULL,
    action      text NOT NULL CONSTRAINT job_change_action_valid CHECK (action IN (
                    'created', 'updated', 'paused', 'resumed', 'unscheduled', 'triggered',
                    'paused_after_failure', 'finished')),
    reason      text,
    changed_by  name NOT NULL DEFAULT current_user,
    changed_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX job_change_job_idx ON cronbox.job_change (job_id, change_id DESC);
