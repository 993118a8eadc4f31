-- 0020: what dispatch and the worker functions need beyond the core tables.
--   job_dependency  gates added with cronbox.add_dependency (a due run waits for upstreams)
--   queue_limit     per-queue cap on unfinished runs (cronbox.set_queue_limit)
--   indexes         pull-mode claims (cronbox.claim_runs), after-job lookup on success

CREATE TABLE cronbox.job_dependency (
    job_id        bigint NOT NULL REFERENCES cronbox.job (job_id) ON DELETE CASCADE,
    upstream_id   bigint NOT NULL REFERENCES cronbox.job (job_id) ON DELETE CASCADE,
    within        interval,      -- upstream success no older than this; NULL: since the previous fire
    wait_timeout  interval,      -- fail a waiting run after this long; NULL: wait forever
    created_at    timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (job_id, upstream_id),
    CONSTRAINT job_dependency_not_self CHECK (job_id <> upstream_id),
    CONSTRAINT job_dependency_within_positive CHECK (within IS NULL OR within > interval '0'),
    CONSTRAINT job_dependency_wait_timeout_positive CHECK (wait_timeout IS NULL OR wait_timeout > interval '0')
);
-- A success of an upstream releases the futures of the jobs it gates.
CREATE INDEX job_dependency_upstream_idx ON cronbox.job_dependency (upstream_id);

CREATE TABLE cronbox.queue_limit (
    queue         text PRIMARY KEY,
    max_running   integer NOT NULL CONSTRAINT queue_limit_max_running_positive CHECK (max_running >= 1),
    -- Unfinished (dispatched, delivered, running) runs of the queue. Maintained by dispatch
    -- and the finishing functions under this row's lock; cronbox.reconcile_queue_limits
    -- recounts it from cronbox.run (the poller calls it periodically).
    running       integer NOT NULL DEFAULT 0 CONSTRAINT queue_limit_running_nonnegative CHECK (running >= 0),
    updated_at    timestamptz NOT NULL DEFAULT now()
);

-- Serves cronbox.claim_runs: a pull-mode queue's available messages, oldest first.
CREATE INDEX outbox_pull_idx ON cronbox.outbox (queue, available_at) WHERE kind = 'run';

-- Serves the finishing functions: which `after => ARRAY[...]` jobs list a job that succeeded.
CREATE INDEX job_after_idx ON cronbox.job USING gin (after) WHERE after IS NOT NULL;

-- What cronbox.finish_runs hands from one set-based step to the next: the runs that just
-- reached a final state in this call.
CREATE TYPE cronbox.finished_run AS (
    run_id      bigint,
    job_id      bigint,
    job_name    text,
    queue       text,
    state       text,          -- succeeded | failed | lost | cancelled
    attempt     integer,
    fire_at     timestamptz,
    payload     jsonb,
    error       text,
    retryable   boolean        -- failed/lost and the worker did not say otherwise
);
