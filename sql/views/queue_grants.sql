-- cronbox.queue_grants: the queues granted to owner and worker roles (cronbox.grant_queue;
-- docs/operations.md, "Tenants"). A queue without a grant of a kind is open for that kind.
DROP VIEW IF EXISTS cronbox.queue_grants;
CREATE VIEW cronbox.queue_grants AS
SELECT g.queue, g.grantee AS role, g.kind, g.granted_by, g.granted_at,
       EXISTS (SELECT 1 FROM pg_catalog.pg_roles r WHERE r.rolname = g.grantee) AS role_exists
FROM cronbox.queue_grant g;

COMMENT ON VIEW cronbox.queue_grants IS
    'Queues granted to owner roles (may schedule and trigger onto them) and worker roles (may work their runs).';
