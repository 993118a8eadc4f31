-- 0031: the process registry. Every poller and relay registers at start, heartbeats, and
-- deregisters at a clean exit; cronbox.processes shows which are alive. A process that died
-- without deregistering stays visible (live = false) until a later register prunes it.
CREATE TABLE cronbox.process (
    process_id      bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    kind            text NOT NULL CONSTRAINT process_kind_valid CHECK (kind ~ '^[a-z][a-z0-9_-]{0,30}$'),
    name            text NOT NULL CONSTRAINT process_name_unique UNIQUE,  -- kind:host:pid
    host            text NOT NULL,
    pid             integer NOT NULL,
    version         text NOT NULL,
    heartbeat_every interval NOT NULL DEFAULT '5 seconds',
    info            jsonb NOT NULL DEFAULT '{}',
    started_at      timestamptz NOT NULL DEFAULT now(),
    last_seen       timestamptz NOT NULL DEFAULT now()
);
