"""cronbox under Patroni (etcd), as operators run it: a primary and a synchronous standby
(`synchronous_mode`), HAProxy in front checking Patroni's REST API (bench/patroni_cluster.py).
Pollers, relays and HTTP workers run on the multi-host DSN (`target_session_attrs=read-write`)
or on HAProxy's port, under load, through planned switchovers, failovers after a SIGKILL of
the primary's postmaster and after its Patroni froze (SIGSTOP until the standby took the
leader key, then SIGCONT), the old primary rejoining each time (pg_rewind by Patroni). The
checks are bench.chaos's: every fire dispatched exactly once, every run delivered at least
once with duplicates only under the same key, nothing stuck. Delays are measured by
`python -m bench.patroni` (docs/benchmarks.md), never asserted here.

Marker `patroni`: not part of the default run; `pytest -m patroni` or `pytest -k patroni`
(.ci/run runs them).
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from bench import patroni as bench
from bench.fleet import Child
from bench.patroni_cluster import PatroniCluster, PgBouncer, available
from cronbox import db
from cronbox.migrate import migrate
from cronbox.pgcluster import free_port

from .procs import Proc, http_get, wait_until

pytestmark = [pytest.mark.patroni, pytest.mark.skipif(available() is not None, reason=str(available()))]


@pytest.fixture(scope="module")
def patroni() -> Iterator[PatroniCluster]:
    """etcd, two Patroni nodes (primary + synchronous standby) and HAProxy, for the module."""
    root = Path(tempfile.mkdtemp(prefix="cronbox-patroni-test-"))
    cluster = PatroniCluster(root / "ha")
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.stop()
        shutil.rmtree(root, ignore_errors=True)


def _exercise(cluster: PatroniCluster, tmp: Path, dbname: str, argv: list[str]) -> dict:
    args = bench.parse(argv)
    bench.create_database(cluster, dbname)
    children: list[Child] = []
    try:
        return bench.exercise(cluster, bench.dsn_for(cluster, args.via, dbname), tmp, args, children)
    finally:
        for c in reversed(children):
            c.stop()


def _assert_nothing_lost_doubled_or_stuck(report: dict, logs: Path) -> None:
    c = report["checks"]
    assert c["expected_fires"] > 0 and c["deliveries"] > 0, c
    assert (c["lost"], c["doubled"], c["missed"], c["stuck"], c["orphan_outbox_rows"]) == (0, 0, 0, 0, 0), c
    assert c["delivered_runs_unknown"] == 0, c  # no dispatch acknowledged and then lost in a failover
    assert c["duplicates_with_another_key"] == 0 and c["keys_shared_by_two_runs"] == 0, c
    assert c["succeeded_without_delivery"] == 0 and c["lost_runs_not_retried"] == 0, c
    assert report["unexpected_exits"] == {}, (report["unexpected_exits"], logs)
    assert report["ok"], report


def test_multi_host_dsn_rides_out_switchovers_and_failovers_under_load_exactly_once(patroni, tmp_path):
    report = _exercise(patroni, tmp_path, "multihost", [
        "--via", "multihost", "--jobs", "4", "--pollers", "2", "--relays", "2", "--repeat", "2",
        "--gap", "3", "--hold", "2", "--settle", "90"])
    kinds = [f["kind"] for f in report["changes"]]
    assert kinds == ["switchover", "kill_postmaster", "freeze"] * 2, kinds
    assert all(f["from"] != f["to"] for f in report["changes"])
    # a frozen primary went on writing WAL its standby never got: Patroni rewound it to rejoin
    assert any(f["rewound"] for f in report["changes"] if f["kind"] != "switchover"), report["changes"]
    # dispatches resumed after every change, on the new primary
    for kind in ("switchover", "kill_postmaster", "freeze"):
        assert report["recovery"][kind]["dispatch"]["n"] == 2, report["recovery"]
    _assert_nothing_lost_doubled_or_stuck(report, tmp_path)


def test_haproxy_on_patronis_rest_check_rides_out_the_same_changes(patroni, tmp_path):
    report = _exercise(patroni, tmp_path, "haproxy", [
        "--via", "haproxy", "--jobs", "4", "--pollers", "2", "--relays", "1", "--repeat", "1",
        "--gap", "3", "--hold", "2", "--settle", "90"])
    assert [f["kind"] for f in report["changes"]] == ["switchover", "kill_postmaster", "freeze"]
    _assert_nothing_lost_doubled_or_stuck(report, tmp_path)


def test_processes_left_on_a_demoted_primary_neither_dispatch_nor_ack_and_say_so(patroni, tmp_path):
    """A poller and a relay reach the primary through a PgBouncer on its host; a switchover
    demotes it, and PgBouncer goes on handing out that server, a standby now. They must not
    dispatch or ack there (nor quarantine jobs for the refusals), must say so in their log and
    on /healthz, and must come back by themselves when the node is the primary again; a poller
    and relay on the multi-host DSN keep every fire going meanwhile, exactly once."""
    bench.create_database(patroni, "demoted")
    multi = patroni.multi_host_dsn("demoted")
    migrate(multi)
    pinned_node = patroni.converged()
    bouncer = PgBouncer(patroni.root, pinned_node)
    bouncer.start()
    pinned = f"host=127.0.0.1 port={bouncer.port} user=postgres dbname=demoted"
    with db.connect(multi) as conn:
        for i in range(3):
            conn.execute("SELECT cronbox.schedule(%s, every => '1 second', overlap => 'allow', catchup => 'all')",
                         (f"tick{i}",))
    pport, rport = free_port(), free_port()
    common = {"CRONBOX_LISTEN_DSN": "off", "CRONBOX_SINKS": "*=log", "CRONBOX_LOG_LEVEL": "info"}
    procs: list[Proc] = []
    try:
        wait_until(lambda: _reachable(pinned), 30, "pgbouncer accepting connections")
        poller = Proc("poller", pinned, tmp_path, CRONBOX_METRICS_PORT=str(pport), **common)
        relay = Proc("relay", pinned, tmp_path, CRONBOX_METRICS_PORT=str(rport), **common)
        procs += [poller, relay]
        wait_until(lambda: http_get(pport)[0] == 200 and http_get(rport)[0] == 200, 90, "both /healthz 200")
        wait_until(lambda: _acked(multi) >= 6, 60, "runs dispatched and acked through PgBouncer")

        patroni.change("switchover")  # the pinned node is a standby now
        for port in (pport, rport):
            wait_until(lambda port=port: "read-only" in http_get(port)[1] and http_get(port)[0] == 503, 60,
                       f"/healthz on {port} saying read-only")
        wait_until(lambda: "read-only" in poller.output and "read-only" in relay.output, 30, "logs saying read-only")
        assert poller.popen.poll() is None and relay.popen.poll() is None, (poller.output[-2000:], relay.output[-2000:])

        # the fires go on through processes on the multi-host DSN
        before = _dispatched(multi)
        mports = free_port(), free_port()
        procs += [Proc("poller", multi, tmp_path, CRONBOX_METRICS_PORT=str(mports[0]), **common),
                  Proc("relay", multi, tmp_path, CRONBOX_METRICS_PORT=str(mports[1]), **common)]
        wait_until(lambda: _dispatched(multi) >= before + 6, 60, "dispatches on the new primary")
        # both up (their signal handlers installed) before the SIGTERM that must end them with 0
        wait_until(lambda: all(http_get(port)[0] == 200 for port in mports), 60, "the new processes' /healthz 200")
        assert "read-only" in http_get(pport)[1] and "read-only" in http_get(rport)[1]
        for p in procs[2:]:
            assert p.terminate() == 0, p.output[-2000:]

        # the pinned node is the primary again: the processes on it resume by themselves
        patroni.change("switchover")
        assert patroni.converged() is pinned_node
        wait_until(lambda: http_get(pport)[0] == 200 and http_get(rport)[0] == 200, 90, "both /healthz 200 again")
        resumed = _dispatched(multi)
        wait_until(lambda: _dispatched(multi) >= resumed + 6, 60, "dispatches through PgBouncer again")
        for p in (poller, relay):
            assert p.terminate() == 0, p.output[-2000:]

        with db.connect(multi) as conn:
            doubled = conn.execute("SELECT count(*) FROM (SELECT 1 FROM cronbox.runs WHERE origin = 'schedule'"
                                   " GROUP BY job, fire_at HAVING count(*) > 1) d").fetchone()[0]
            paused = conn.execute("SELECT count(*) FROM cronbox.job WHERE paused").fetchone()[0]
        assert doubled == 0
        assert paused == 0, "a read-only server is no job's fault: nothing quarantined"
        assert "job quarantined" not in poller.output
    finally:
        for p in procs:
            p.kill()
        bouncer.stop()


def _reachable(dsn: str) -> bool:
    try:
        with db.connect(dsn):
            return True
    except Exception:
        return False


def _dispatched(dsn: str) -> int:
    with db.connect(dsn) as conn:
        return conn.execute("SELECT count(*) FROM cronbox.runs WHERE dispatched_at IS NOT NULL").fetchone()[0]


def _acked(dsn: str) -> int:
    """Runs dispatched whose message was sent and acked: no outbox row of theirs is still to be
    delivered (a run in flight keeps its outbox row, delivered, until its final report)."""
    with db.connect(dsn) as conn:
        return conn.execute("SELECT count(*) FROM cronbox.runs r WHERE r.dispatched_at IS NOT NULL AND NOT EXISTS"
                            " (SELECT 1 FROM cronbox.outbox o WHERE o.run_id = r.run_id AND o.delivered_at IS NULL)"
                            ).fetchone()[0]
