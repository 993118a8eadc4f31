-- cronbox functions, no Python: complete a batch of delivered runs, complete_run once per run
-- (a run in flight is its outbox row until its final report)
SELECT count(cronbox.complete_run(s.run_id))
FROM (SELECT o.outbox_id AS run_id FROM cronbox.outbox o WHERE o.kind = 'run' AND o.state = 'delivered' LIMIT :batch) s;
