"""Isolation in the relay, with real `cronbox relay` processes and real HTTP servers on
127.0.0.1: a queue `a` whose sink hangs, is slow, refuses connections or answers 500 never
holds up queue `b` (also when both share one URL), loses nothing, and drains once it
recovers; two relays and a SIGKILL during the hang lose nothing either."""

from __future__ import annotations

import asyncio
import threading

import orjson
import pytest
from aiohttp import web

from cronbox import db
from cronbox.pgcluster import free_port

from .procs import Proc, wait_until
from .relay_support import ThreadedWorker, Worker, enqueue

ENV = {
    "CRONBOX_RELAY_LEASE": "10s",
    "CRONBOX_HTTP_TIMEOUT": "1s",
    "CRONBOX_HTTP_CONNECT_TIMEOUT": "500ms",
    "CRONBOX_RELAY_BACKOFF": "50ms",
    "CRONBOX_RELAY_BACKOFF_MAX": "200ms",
    "CRONBOX_RELAY_MAX_ATTEMPTS": "1000",
    "CRONBOX_RELAY_BREAKER_PROBE": "100ms",
    "CRONBOX_RELAY_BREAKER_PROBE_MAX": "300ms",
    "CRONBOX_RELAY_BATCH": "20",
    "CRONBOX_POLL_INTERVAL": "100ms",
}


class Sink:
    """Answers queue `b` at once; queue `a` per `mode` until `recover()`: hang (never answers),
    slow (answers after 3 s, past the relay's 1 s timeout), error (500)."""

    def __init__(self, mode: str):
        self.mode = mode
        self.recovered = threading.Event()
        self.pending = 0  # requests of `a` entered and not answered

    async def answer(self, request: web.Request, body: bytes) -> web.StreamResponse:
        if orjson.loads(body)["queue"] != "a" or self.recovered.is_set():
            return web.Response(status=202)
        self.pending += 1
        try:
            if self.mode == "error":
                return web.Response(status=500, text="broken")
            waited = 0.0
            # the sink's own behaviour (a hung or slow service), not test synchronisation
            while not self.recovered.is_set() and (self.mode == "hang" or waited < 3.0):
                await asyncio.sleep(0.02)
                waited += 0.02
            return web.Response(status=202)
        finally:
            self.pending -= 1


def count(dsn: str, sql: str, params: tuple = ()) -> int:
    with db.connect(dsn) as conn:
        return int(conn.execute(sql, params).fetchone()[0])


def waiting(dsn: str, queue: str) -> int:
    return count(dsn, "SELECT count(*) FROM cronbox.outbox WHERE queue = %s AND coalesce(state, 'dispatched') = 'dispatched'", (queue,))


def all_delivered(dsn: str, runs: list[int]) -> bool:
    return count(dsn, "SELECT count(*) FROM cronbox.runs WHERE run_id = ANY(%s) AND state = 'delivered'", (runs,)) == len(runs)


def keys(runs: list[int]) -> set[str]:
    return {f"{r}:1" for r in runs}


@pytest.mark.parametrize("mode", ["hang", "slow", "error", "refused"])
def test_a_broken_sink_on_queue_a_never_holds_up_queue_b(fresh_dsn, tmp_path, mode):
    sink = Sink("hang" if mode == "refused" else mode)
    served = ThreadedWorker(sink.answer)
    with served as worker:
        dead_port = free_port()
        a_url = f"http://127.0.0.1:{dead_port}/run" if mode == "refused" else worker.url
        env = {**ENV, "CRONBOX_SINKS": f"a={a_url}; *={worker.url}"}
        if mode == "hang":
            env["CRONBOX_HTTP_TIMEOUT"] = "20s"  # a's requests stay pending for the whole test
        with db.connect(fresh_dsn) as conn:
            a_runs = enqueue(conn, 200, queue="a")
        with Proc("relay", fresh_dsn, tmp_path, **env) as relay:
            if mode in ("hang", "slow"):
                wait_until(lambda: sink.pending > 0, what="a's requests pending")
            else:
                wait_until(lambda: count(fresh_dsn, "SELECT count(*) FROM cronbox.outbox WHERE queue = 'a' "
                                                    "AND attempts > 0") > 0, what="a's sends failing")
            with db.connect(fresh_dsn) as conn:
                b_runs = enqueue(conn, 100, queue="b")
            wait_until(lambda: keys(b_runs) <= set(worker.keys()), timeout=20, what="all of b delivered")
            # b went through while a was still broken, and none of a was lost or delivered
            assert waiting(fresh_dsn, "a") == 200
            if mode == "hang":
                assert sink.pending > 0, "a's requests should still be pending"
            assert count(fresh_dsn, "SELECT count(*) FROM cronbox.dead_letters") == 0
            assert count(fresh_dsn, "SELECT count(*) FROM cronbox.runs WHERE run_id = ANY(%s) AND state <> 'dispatched'",
                         (a_runs,)) == 0

            # recovery: a's backlog drains, nothing lost
            sink.recovered.set()
            if mode == "refused":
                late = Worker(sink.answer)
                asyncio.run_coroutine_threadsafe(late.start(dead_port), served.loop).result(10)
                received = lambda: set(worker.keys()) | set(late.keys())  # noqa: E731
            else:
                received = lambda: set(worker.keys())  # noqa: E731
            wait_until(lambda: all_delivered(fresh_dsn, a_runs + b_runs), timeout=30, what="a drained")
            assert keys(a_runs) <= received()
            assert waiting(fresh_dsn, "a") == 0
            assert count(fresh_dsn, "SELECT count(*) FROM cronbox.dead_letters") == 0
            assert relay.terminate() == 0, relay.output
            if mode == "refused":
                asyncio.run_coroutine_threadsafe(late.stop(), served.loop).result(10)
        if mode in ("error", "refused"):
            assert "circuit breaker open" in relay.output


def test_two_relays_and_a_sigkill_during_the_hang_lose_nothing(fresh_dsn, tmp_path):
    sink = Sink("hang")
    with ThreadedWorker(sink.answer) as worker:
        env = {**ENV, "CRONBOX_SINKS": f"*={worker.url}", "CRONBOX_HTTP_TIMEOUT": "3s", "CRONBOX_RELAY_LEASE": "4s"}
        with db.connect(fresh_dsn) as conn:
            a_runs = enqueue(conn, 40, queue="a")
        with Proc("relay", fresh_dsn, tmp_path, **env) as steady, Proc("relay", fresh_dsn, tmp_path, **env) as victim:
            wait_until(lambda: sink.pending > 0, what="a's requests pending")
            with db.connect(fresh_dsn) as conn:
                b_runs = enqueue(conn, 60, queue="b")
            victim.kill()  # SIGKILL while a's requests hang and b's flow
            assert victim.popen.returncode == -9
            with db.connect(fresh_dsn) as conn:
                b_runs += enqueue(conn, 60, queue="b")
            wait_until(lambda: keys(b_runs) <= set(worker.keys()), timeout=20, what="all of b delivered")
            assert sink.pending > 0 and waiting(fresh_dsn, "a") == 40
            sink.recovered.set()
            wait_until(lambda: all_delivered(fresh_dsn, a_runs + b_runs), timeout=30, what="everything delivered")
            assert keys(a_runs + b_runs) <= set(worker.keys())
            assert count(fresh_dsn, "SELECT count(*) FROM cronbox.outbox WHERE coalesce(state, 'dispatched') = 'dispatched'") == 0
            assert count(fresh_dsn, "SELECT count(*) FROM cronbox.dead_letters") == 0
            assert steady.terminate() == 0, steady.output
