-- 0032: autovacuum for the hot queue tables. job_future and outbox see every row inserted,
-- updated and deleted within seconds; the default (vacuum after 20% of the table is dead)
-- lets dead tuples pile up at the head of their claim indexes, and every claim then walks
-- past them (a queue's throughput collapses as dead tuples pile up). Vacuum them after a
-- fixed number of dead rows instead, without cost-based throttling.
ALTER TABLE cronbox.outbox SET (
    autovacuum_vacuum_scale_factor = 0,
    autovacuum_vacuum_threshold = 5000,
    autovacuum_vacuum_insert_scale_factor = 0,
    autovacuum_vacuum_insert_threshold = 20000,
    autovacuum_analyze_scale_factor = 0.05,
    autovacuum_vacuum_cost_delay = 0
);
ALTER TABLE cronbox.job_future SET (
    autovacuum_vacuum_scale_factor = 0,
    autovacuum_vacuum_threshold = 5000,
    autovacuum_vacuum_insert_scale_factor = 0,
    autovacuum_vacuum_insert_threshold = 20000,
    autovacuum_analyze_scale_factor = 0.05,
    autovacuum_vacuum_cost_delay = 0
);
