-- cronbox functions, no Python: claim a batch and ack it (the relay does these in two
-- transactions with the HTTP send between them; here they share one)
SELECT cronbox.ack_outbox('pgbench', array_agg(c.outbox_id)) FROM cronbox.claim_outbox('pgbench', :batch) c;
