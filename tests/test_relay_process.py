"""`cronbox relay` as a real process: SIGKILL mid-batch (repeatedly) with a second relay
running, SIGTERM, registration in cronbox.processes, a configuration error at start, and a
PostgreSQL restart under a running relay."""

from __future__ import annotations

import asyncio
import os
import subprocess
import tempfile
from collections import defaultdict
from pathlib import Path

import pytest
from aiohttp import web

from cronbox import db
from cronbox.migrate import migrate
from cronbox.pgcluster import FAST_SETTINGS, Cluster

from .procs import Proc, wait_until
from .relay_support import ThreadedWorker, enqueue

FAST_ENV = {
    "CRONBOX_RELAY_LEASE": "1s",
    "CRONBOX_HTTP_TIMEOUT": "800ms",
    "CRONBOX_RELAY_BACKOFF": "50ms",
    "CRONBOX_RELAY_BACKOFF_MAX": "200ms",
    "CRONBOX_RELAY_MAX_ATTEMPTS": "1000",
    "CRONBOX_POLL_INTERVAL": "100ms",
}


def slow_answer(seconds: float):
    async def answer(request: web.Request, body: bytes) -> web.StreamResponse:
        await asyncio.sleep(seconds)  # the worker's "work": keeps sends in flight
        return web.Response(status=202)
    return answer


def one(dsn: str, sql: str, params: tuple = ()) -> object:
    with db.connect(dsn) as conn:
        return conn.execute(sql, params).fetchone()[0]


def registered(dsn: str, pid: int) -> bool:
    return bool(one(dsn, "SELECT count(*) FROM cronbox.processes WHERE kind = 'relay' AND pid = %s AND live", (pid,)))


@pytest.mark.slow
def test_sigkilled_relays_lose_nothing_and_duplicates_carry_the_same_idempotency_key(fresh_dsn, tmp_path):
    kills, wave = 20, 40
    with ThreadedWorker(slow_answer(0.05)) as worker:
        env = {**FAST_ENV, "CRONBOX_SINKS": f"*={worker.url}", "CRONBOX_RELAY_BATCH": "10"}
        with Proc("relay", fresh_dsn, tmp_path, **env) as steady:
            wait_until(lambda: registered(fresh_dsn, steady.popen.pid), what="steady relay registered")
            runs: list[int] = []
            for _ in range(kills):
                with Proc("relay", fresh_dsn, tmp_path, **env) as victim:
                    wait_until(lambda: registered(fresh_dsn, victim.popen.pid), what="victim registered")
                    with db.connect(fresh_dsn) as conn:
                        new = enqueue(conn, wave)
                    runs += new
                    keys = {f"{r}:1" for r in new}
                    wait_until(lambda: sum(k in keys for k in worker.keys()) >= wave // 4, what="wave in flight")
                    victim.kill()  # SIGKILL, mid-batch
                    assert victim.popen.returncode == -9
            wait_until(lambda: one(fresh_dsn, "SELECT count(*) FROM cronbox.outbox WHERE coalesce(state, 'dispatched') = 'dispatched'") == 0, timeout=30,
                       what="every message acked")
            assert steady.terminate() == 0, steady.output

    received: dict[int, list] = defaultdict(list)
    for req in worker.received:
        (message,) = req.messages
        received[message["run_id"]].append((req.key, message["idempotency_key"]))
    assert set(received) == set(runs)  # every message delivered at least once: none lost
    for run_id, copies in received.items():
        assert {c for pair in copies for c in pair} == {f"{run_id}:1"}  # header and body agree, every copy
    duplicated = [r for r, copies in received.items() if len(copies) > 1]
    assert duplicated, "no kill landed mid-batch: the test did not exercise a crash"
    with db.connect(fresh_dsn) as conn:
        states = dict(conn.execute("SELECT state, count(*) FROM cronbox.runs GROUP BY state").fetchall())
        assert states == {"delivered": kills * wave}
        assert conn.execute("SELECT count(*) FROM cronbox.dead_letters").fetchone()[0] == 0


def test_sigterm_finishes_in_flight_sends_releases_stuck_leases_and_exits_zero(fresh_dsn, tmp_path):
    gate = asyncio.Event()
    forever = asyncio.Event()

    async def answer(request: web.Request, body: bytes) -> web.StreamResponse:
        if b'"queue": "slow"' in body:
            await gate.wait()
        else:
            await forever.wait()
        return web.Response(status=202)

    threaded = ThreadedWorker(answer)
    with threaded as worker:
        env = {"CRONBOX_SINKS": f"*={worker.url}", "CRONBOX_RELAY_LEASE": "60s", "CRONBOX_HTTP_TIMEOUT": "30s",
               "CRONBOX_SHUTDOWN_TIMEOUT": "2s"}
        with db.connect(fresh_dsn) as conn:
            (slow,) = enqueue(conn, 1, queue="slow")
            (stuck,) = enqueue(conn, 1, queue="stuck")
        with Proc("relay", fresh_dsn, tmp_path, **env) as relay:
            wait_until(lambda: registered(fresh_dsn, relay.popen.pid), what="relay registered")
            wait_until(lambda: len(worker.received) == 2, what="both sends in flight")
            relay.popen.terminate()
            wait_until(lambda: "stopping" in relay.output, what="relay saw SIGTERM")
            threaded.loop.call_soon_threadsafe(gate.set)  # the slow send finishes during shutdown
            assert relay.popen.wait(20) == 0, relay.output
        threaded.loop.call_soon_threadsafe(forever.set)

    with db.connect(fresh_dsn) as conn:
        assert conn.execute("SELECT state FROM cronbox.runs WHERE run_id = %s", (slow,)).fetchone()[0] == "delivered"
        row = conn.execute("SELECT run_id, lease_owner, available_at <= now() FROM cronbox.outbox "
                           "WHERE state = 'dispatched'").fetchall()  # (the delivered run's row stays the run)
        assert row == [(stuck, None, True)]  # handed back: claimable now, not in 60 s
        assert conn.execute("SELECT count(*) FROM cronbox.processes").fetchone()[0] == 0  # deregistered


def test_relay_refuses_to_start_when_a_queue_has_no_route(fresh_dsn, tmp_path):
    with db.connect(fresh_dsn) as conn:
        enqueue(conn, 1, queue="billing")
    with Proc("relay", fresh_dsn, tmp_path, CRONBOX_SINKS="default=log; ml=postgres") as relay:
        assert relay.popen.wait(20) == 1
    assert "queue(s) 'billing' have no route" in relay.output
    assert one(fresh_dsn, "SELECT attempts FROM cronbox.outbox") == 0  # nothing claimed, nothing dropped


@pytest.fixture
def private_cluster():
    """A PostgreSQL of this test's own, so restarting it disturbs no other test."""
    tmp = Path(tempfile.mkdtemp(prefix="cronbox-restart-"))
    os.chmod(tmp, 0o755)
    cluster = Cluster(tmp / "pg", settings=dict(FAST_SETTINGS))
    dsn = cluster.start()
    migrate(dsn)
    try:
        yield cluster, dsn
    finally:
        cluster.stop(mode="immediate")
        subprocess.run(["rm", "-rf", str(tmp)], check=False)


def test_relay_recovers_after_postgresql_restarts_and_delivers_the_rest(private_cluster, tmp_path):
    cluster, dsn = private_cluster
    with ThreadedWorker(slow_answer(0.05)) as worker:
        env = {**FAST_ENV, "CRONBOX_RELAY_LEASE": "2s", "CRONBOX_SINKS": f"*={worker.url}", "CRONBOX_RELAY_BATCH": "5"}
        with db.connect(dsn) as conn:
            runs = enqueue(conn, 30)
        with Proc("relay", dsn, tmp_path, **env) as relay:
            wait_until(lambda: len(worker.received) >= 5, what="deliveries under way")
            cluster.restart()  # same port; in-flight acks and the listener lose their connections
            with db.connect(dsn) as conn:
                runs += enqueue(conn, 10)
            wait_until(lambda: one(dsn, "SELECT count(*) FROM cronbox.outbox WHERE coalesce(state, 'dispatched') = 'dispatched'") == 0, timeout=40,
                       what="everything acked after the restart")
            assert relay.popen.poll() is None, relay.output
            assert relay.terminate() == 0, relay.output
            assert "listener disconnected" in relay.output  # the restart did hit this relay
    assert {k for k in worker.keys()} == {f"{r}:1" for r in runs}
    with db.connect(dsn) as conn:
        assert conn.execute("SELECT state, count(*) FROM cronbox.runs GROUP BY state").fetchall() == [("delivered", 40)]


def test_a_relay_leaves_notifications_to_the_relay_whose_route_names_them(fresh_dsn, tmp_path):
    """Two relays, one naming cronbox.notifications (a webhook), the other not: every
    notification reaches the webhook, none goes to the other relay's log."""
    from .relay_support import notify_row

    with ThreadedWorker() as hook, db.connect(fresh_dsn) as conn:
        conn.autocommit = True
        named = Proc("relay", fresh_dsn, tmp_path, CRONBOX_SINKS=f"*=log; cronbox.notifications={hook.url}")
        with named:
            wait_until(lambda: conn.execute("SELECT count(*) FROM cronbox.processes WHERE kind = 'relay' AND live "
                                            "AND info -> 'routes' ? 'cronbox.notifications'").fetchone()[0] == 1,
                       20, "the naming relay registered")
            other = Proc("relay", fresh_dsn, tmp_path, CRONBOX_SINKS="*=log")
            with other:
                wait_until(lambda: "leaving them to it" in other.output, 20, "the other relay yields")
                for i in range(20):
                    notify_row(conn, "cronbox.notifications", {"event": "run_failed", "job": "j",
                                                               "idempotency_key": f"n:{i}"})
                conn.execute("NOTIFY cronbox_outbox")
                wait_until(lambda: len(hook.received) >= 20, 20, "every notification at the webhook")
                assert "queue=cronbox.notifications" not in other.output
                assert other.terminate() == 0
            assert named.terminate() == 0
