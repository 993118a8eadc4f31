"""Which behaviour modules the Citus run (`pytest -m citus`, `pytest -k citus`) also runs,
unchanged, against a database on a Citus coordinator migrated with `cronbox migrate --citus`
(tests/conftest.py), and the tests among them that do not hold there, with the reason
(docs/citus.md lists the same).

The schedule, run, relay and worker-kit behaviour: what a user of the scheduler sees. Their slow
tests (1,000,000-schedule plans, long real-process runs) stay on plain PostgreSQL, as do the
modules that never reach the database (sink parsing, request signing) and the suites about the
server rather than the scheduler (operations, upgrades, the console)."""

from __future__ import annotations

import dataclasses
import socket
from collections.abc import Callable
from datetime import datetime

import pytest

from cronbox import db

ON_CITUS_MODULES = frozenset({
    "test_schedule_api.py",
    "test_schedule_catchup.py",
    "test_schedule_docs.py",
    "test_schedule_never_quarantined.py",
    "test_schedule_ops.py",
    "test_schedule_ops_procs.py",
    "test_schedule_options.py",
    "test_schedule_pollers.py",
    "test_schedule_scale.py",
    "test_schedule_time.py",
    "test_schedule_validation.py",
    "test_runs_burst.py",
    "test_runs_dependencies.py",
    "test_runs_dispatch.py",
    "test_runs_early.py",
    "test_runs_guards.py",
    "test_runs_history.py",
    "test_runs_integration.py",
    "test_runs_job_lock.py",
    "test_runs_leases.py",
    "test_runs_retry.py",
    "test_runs_trigger.py",
    "test_runs_unfinished.py",
    "test_runs_waiting.py",
    "test_runs_worker_api.py",
    "test_relay_http.py",
    "test_relay_mail.py",
    "test_relay_message.py",
    "test_relay_process.py",
    "test_relay_sql.py",
    "test_worker_api.py",
    "test_worker_pull.py",
    "test_worker_push.py",
    "test_worker_shutdown.py",
    "test_client.py",
    "test_pipeline.py",
    "test_tenants.py",
})

# test (module.py::name, or a whole module.py) -> why it does not hold on Citus
ON_CITUS_SKIPS: dict[str, str] = {
}

# The behaviour modules (of ON_CITUS_MODULES) that hold on the distributed tables too (`cronbox
# migrate --citus --distribute`): on Citus each of their tests also runs there, as `[distributed]`
# with the marker `citus_distributed` (docs/citus.md, "Distributing the hot tables": the table of
# every module, and why the others do not hold yet).
ON_DISTRIBUTED_MODULES = frozenset({
    "test_pipeline.py",
    "test_relay_http.py",
    "test_relay_isolation.py",
    "test_relay_mail.py",
    "test_relay_process.py",
    "test_schedule_ops_procs.py",
    "test_schedule_pollers.py",
    "test_worker_api.py",
    "test_worker_push.py",
    "test_worker_shutdown.py",
})

# test (module.py::name) of ON_DISTRIBUTED_MODULES -> why it does not hold on the distributed tables
ON_DISTRIBUTED_SKIPS: dict[str, str] = {
}


# The bucket leases of the poller and relay lease tests (tests/test_citus_poller_leases.py,
# tests/test_citus_relay_leases.py): one fixture, `bucket_leases`, gives either kind's.
BUCKET_LEASE = 2.0  # seconds: renewed every 0.67 s


@dataclasses.dataclass(frozen=True)
class LeaseWatch:
    """The bucket leases of one kind of process ('poller' or 'relay') in a database migrated with
    --citus: the settings its processes run with in these tests, and who holds which buckets."""

    dsn: str
    kind: str
    total: int  # the buckets
    lease: float = BUCKET_LEASE

    @property
    def env(self) -> dict[str, str]:
        return {f"CRONBOX_{self.kind.upper()}_BUCKET_LEASE": f"{self.lease:g}s", "CRONBOX_POLL_INTERVAL": "100ms"}

    def owner(self, proc) -> str:
        """The lease owner of a process of tests/procs.py (cronbox.proc.identity)."""
        return f"{self.kind}:{socket.gethostname()}:{proc.popen.pid}"

    def held(self) -> dict[str, list[int]]:
        """The buckets held by a live member, per owner."""
        with db.connect(self.dsn) as conn:
            return dict(conn.execute(
                "SELECT l.owner, array_agg(l.bucket ORDER BY l.bucket) FROM cronbox.bucket_lease l"
                " JOIN cronbox.bucket_member m USING (kind, owner)"
                " WHERE l.kind = %s AND m.alive_until >= clock_timestamp() GROUP BY 1", (self.kind,)).fetchall())

    def shared_by(self, owners: set[str]) -> dict[str, list[int]] | None:
        """The holdings when exactly `owners` hold every bucket, each its even share."""
        now = self.held()
        counts = sorted(len(b) for b in now.values())
        if set(now) != owners or sum(counts) != self.total or counts[-1] - counts[0] > 1:
            return None
        every = [b for buckets in now.values() for b in buckets]
        assert len(set(every)) == len(every), now  # disjoint
        return now

    def alive_until(self, owner: str) -> datetime:
        with db.connect(self.dsn) as conn:
            return conn.execute("SELECT alive_until FROM cronbox.bucket_member WHERE kind = %s AND owner = %s",
                                (self.kind, owner)).fetchone()[0]

    def taken(self, buckets: list[int]) -> tuple[datetime, datetime]:
        """When the first and the last of `buckets` were taken by their holders now."""
        with db.connect(self.dsn) as conn:
            return conn.execute("SELECT min(held_since), max(held_since) FROM cronbox.bucket_lease"
                                " WHERE kind = %s AND bucket = ANY (%s)", (self.kind, buckets)).fetchone()

    def holders(self) -> int:
        """Buckets with an owner (0 once every process released them)."""
        with db.connect(self.dsn) as conn:
            return conn.execute("SELECT count(*) FROM cronbox.bucket_lease WHERE kind = %s AND owner IS NOT NULL",
                                (self.kind,)).fetchone()[0]


@pytest.fixture
def bucket_leases(pg, fresh_dsn: str) -> Callable[[str], LeaseWatch]:
    """`bucket_leases('poller' | 'relay')`: the leases of that kind in `fresh_dsn`; skips unless
    the session runs on Citus (pytest -m citus, -k citus, CRONBOX_TEST_CITUS=1)."""
    from .conftest import CitusServer

    if not isinstance(pg, CitusServer):
        pytest.skip("only when the session runs on Citus (pytest -m citus, -k citus, CRONBOX_TEST_CITUS=1)")
    with db.connect(fresh_dsn) as conn:
        total = conn.execute("SELECT count(*) FROM cronbox.bucket").fetchone()[0]
    return lambda kind: LeaseWatch(fresh_dsn, kind, total)
