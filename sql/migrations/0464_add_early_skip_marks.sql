-- 0464: what deciding a 'skip' fire ahead of its time needs (docs/architecture.md, "Early
-- 'skip' fires").
-- cronbox.outbox.claim_at_due: the row may be claimed only from its available_at, never ahead
-- of it (claim_outbox's p_ahead passes it over): an early 'skip' run must stay withdrawable
-- until its fire time, and a row a relay holds cannot be withdrawn. Not indexed: set by early
-- dispatch in place (HOT), read on the rows a claim walks.
-- cronbox.job_stat.early_*: the job's early 'skip' run, if any: its due time (the marker the
-- paths that dispatch another run of the job look for, by key) and the statistics as they were
-- before it (last fire, last run and its state), so that withdrawing it leaves them as if it had
-- never been written.
ALTER TABLE cronbox.outbox ADD COLUMN claim_at_due boolean NOT NULL DEFAULT false;
ALTER TABLE cronbox.job_stat
    ADD COLUMN early_due_at timestamptz,
    ADD COLUMN early_prev_fire_at timestamptz,
    ADD COLUMN early_prev_run_id bigint,
    ADD COLUMN early_prev_state text;
