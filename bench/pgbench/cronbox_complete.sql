-- cronbox functions, no Python: complete a batch of delivered runs, complete_run once per run
SELECT count(cronbox.complete_run(s.run_id))
FROM (SELECT r.run_id FROM cronbox.run r WHERE r.state = 'delivered' LIMIT :batch) s;
