-- 0271: the job's own recipients (schedule(..., notify => ARRAY['mailto:...', 'https://...']))
-- get its notifications besides the global cronbox.notifications route, one outbox row per
-- recipient on the queue cronbox.mail (mailto:) or cronbox.webhooks (http(s):), written by the
-- trigger cronbox.notify_stakeholders. No mail storm: per job and recipient, the first event of
-- a window (cronbox.notify_window(), default 10 minutes) goes at once; later ones of the same
-- window are folded into one digest message with a count, sent at the window's end.
CREATE TABLE cronbox.stakeholder_digest (
    job_id       bigint NOT NULL REFERENCES cronbox.job (job_id) ON DELETE CASCADE,
    recipient    text NOT NULL,
    window_start timestamptz NOT NULL,   -- when the last message of this job to this recipient was due
    outbox_id    bigint NOT NULL,         -- that message (folded into while still unsent)
    PRIMARY KEY (job_id, recipient)
);
