-- cronbox.processes: registered pollers, relays, workers and web consoles; live = seen within 3 heartbeats.
DROP VIEW IF EXISTS cronbox.processes;
CREATE VIEW cronbox.processes AS
SELECT p.process_id, p.kind, p.name, p.host, p.pid, p.version, p.started_at, p.last_seen,
       p.last_seen >= now() - 3 * p.heartbeat_every AS live,
       now() - p.started_at AS uptime, p.info
FROM cronbox.process p;
COMMENT ON VIEW cronbox.processes IS 'Pollers, relays, workers and web consoles that registered (kind): host, pid, version, started, last seen, live (seen within 3 heartbeat intervals).';
