-- cronbox.queue_grants: the queues granted to owner and worker roles (cronbox.grant_queue;
-- docs/operations.md, "Tenants"). A queue without a grant of a kind is open for that kind.
-- Read through cronbox.queue_grant_rows() (why: that function's comment).
DROP VIEW IF EXISTS cronbox.queue_grants;
CREATE VIEW cronbox.queue_grants AS
SELECT g.queue, g.role, g.kind, g.granted_by, g.granted_at, g.role_exists
FROM cronbox.queue_grant_rows() g;

COMMENT ON VIEW cronbox.queue_grants IS
    'Queues granted to owner roles (may schedule and trigger onto them) and worker roles (may work their runs).';
