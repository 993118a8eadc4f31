"""The relay against real HTTP workers on 127.0.0.1 and a real database: single and batched
posts, signatures, outcomes, and the failure modes (500s, 400s, hangs, a worker that is down).

The relay runs in-process here (relay.main.run on this event loop) so the scripted workers and
the relay share one loop; tests/test_relay_process.py runs it as a real subprocess.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import Any

import orjson
import pytest
from aiohttp import web

from cronbox import db
from cronbox.config import Config
from cronbox.pgcluster import free_port
from cronbox.proc import Waker
from cronbox.signing import HEADER, verify
from relay import main as relay_main
from relay.settings import RelaySettings

from .relay_support import Worker, enqueue, notify_row

FAST = RelaySettings(max_attempts=50, backoff=0.05, backoff_max=0.2, http_timeout=2.0, check_every=0.5,
                     breaker_probe=0.05, breaker_probe_max=0.2)


class RunningRelay:
    def __init__(self, dsn: str, sinks: str, settings: RelaySettings = FAST, batch: int = 100):
        cfg = Config(dsn=dsn, poll_interval=timedelta(milliseconds=100), shutdown_timeout=timedelta(seconds=3))
        settings = dataclasses.replace(settings, sinks=sinks, batch=batch, lease=timedelta(seconds=5))
        self.waker = Waker()
        self.task = asyncio.create_task(relay_main.run(cfg, self.waker, settings))

    async def stop(self) -> None:
        self.waker.stop.set()
        await asyncio.wait_for(self.task, 15)


async def eventually(check: Callable[[], Awaitable[Any]], timeout: float = 20, what: str = "condition") -> Any:
    """Poll an observable condition without blocking the loop the relay runs on."""
    deadline = time.monotonic() + timeout
    while True:
        result = await check()
        if result:
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what} (last: {result!r})")
        await asyncio.sleep(0.05)


async def query(dsn: str, sql: str, params: tuple = ()) -> list[tuple]:
    async with await db.aconnect(dsn) as conn:
        cur = await conn.execute(sql, params)
        return await cur.fetchall()


async def outbox_empty(dsn: str) -> bool:
    """No run message left (notifications of failed runs may wait for their own route)."""
    return (await query(dsn, "SELECT count(*) FROM cronbox.outbox WHERE kind = 'run' AND coalesce(state, 'dispatched') = 'dispatched'"))[0][0] == 0


async def states(dsn: str, runs: list[int]) -> dict[int, tuple]:
    rows = await query(dsn, "SELECT run_id, state, error FROM cronbox.runs WHERE run_id = ANY(%s)", (runs,))
    return {r[0]: (r[1], r[2]) for r in rows}


def answer_json(doc: Any, status: int = 200, headers: dict[str, str] | None = None):
    async def answer(request: web.Request, body: bytes) -> web.StreamResponse:
        return web.json_response(doc(body) if callable(doc) else doc, status=status, headers=headers)
    return answer


async def test_single_messages_are_posted_with_their_idempotency_key_and_acked(fresh_dsn):
    worker = await Worker().start()
    relay = RunningRelay(fresh_dsn, f"*={worker.url}")
    try:
        with db.connect(fresh_dsn) as conn:
            runs = enqueue(conn, 5)
        await eventually(lambda: outbox_empty(fresh_dsn), what="outbox drained")
    finally:
        await relay.stop()
        await worker.stop()
    assert sorted(worker.keys()) == sorted(f"{r}:1" for r in runs)
    for req in worker.received:
        (message,) = req.messages
        assert req.key == message["idempotency_key"]
        assert set(message) >= {"run_id", "job", "queue", "payload", "fire_at", "attempt", "deadline"}
        assert HEADER not in req.headers  # no secret configured
    assert {s for s, _ in (await states(fresh_dsn, runs)).values()} == {"delivered"}


async def test_batched_posts_carry_a_json_array_and_the_answer_decides_per_message(fresh_dsn):
    def per_message(body: bytes) -> list[dict]:
        import orjson
        out = []
        for m in orjson.loads(body):
            n = m["run_id"]
            if "event" in m:  # the run_failed notification of the refused one
                out.append({"accepted": True})
            elif m["fire_at"].endswith(":01+00:00"):
                out.append({"accepted": False, "error": "bad payload", "retryable": False})
            elif m["fire_at"].endswith(":02+00:00"):
                out.append({"state": "succeeded", "result": {"n": n}})
            else:
                out.append({"accepted": True})
        return out

    worker = await Worker(answer_json(per_message)).start()
    relay = RunningRelay(fresh_dsn, f"*={worker.url} batch=4")
    try:
        with db.connect(fresh_dsn) as conn:
            runs = enqueue(conn, 10)
        await eventually(lambda: outbox_empty(fresh_dsn), what="outbox drained")
    finally:
        await relay.stop()
        await worker.stop()
    assert all(1 <= len(r.messages) <= 4 for r in worker.received)
    assert len(worker.received) < 10  # batched, not one request per message
    assert sorted(worker.keys()) == sorted(f"{r}:1" for r in runs)
    got = await states(fresh_dsn, runs)
    assert got[runs[0]] == ("failed", "undeliverable: bad payload")  # fire_at ...:01
    assert got[runs[1]] == ("succeeded", None)                        # fire_at ...:02
    assert {got[r][0] for r in runs[2:]} == {"delivered"}
    dead = await query(fresh_dsn, "SELECT run_id, attempts FROM cronbox.dead_letters")
    assert dead == [(runs[0], 1)]


def declares(batch: int | None, flag: dict | None = None):
    """An answer that accepts everything and declares `Cronbox-Accept-Batch: batch` while
    flag["batch"] (when given) says so; a replaced worker (flag["batch"] = None) refuses arrays."""
    async def answer(request: web.Request, body: bytes) -> web.StreamResponse:
        n = flag["batch"] if flag is not None else batch
        if n is None:
            if body.lstrip().startswith(b"["):
                return web.json_response({"error": "expected one message"}, status=400)
            return web.json_response({"accepted": True}, status=202)
        doc = orjson.loads(body)
        out = [{"accepted": True}] * len(doc) if isinstance(doc, list) else {"accepted": True}
        return web.json_response(out, status=202, headers={"Cronbox-Accept-Batch": str(n)})
    return answer


async def delivered(dsn: str, runs: list[int]) -> bool:
    return {s for s, _ in (await states(dsn, runs)).values()} == {"delivered"}


async def one_then_more(dsn: str, worker: Worker, sinks: str, n: int,
                        between: Callable[[], None] = lambda: None) -> tuple[list[int], list[int]]:
    """One run delivered (its answer is the first the relay sees), `between`, then n more."""
    relay = RunningRelay(dsn, sinks)
    try:
        with db.connect(dsn) as conn:
            first = enqueue(conn, 1)
        await eventually(lambda: delivered(dsn, first), what="the first run delivered")
        between()
        with db.connect(dsn) as conn:
            runs = enqueue(conn, n)
        await eventually(lambda: delivered(dsn, runs), what=f"{n} runs delivered")
    finally:
        await relay.stop()
        await worker.stop()
    return first, runs


async def test_the_default_route_sends_batches_once_the_worker_declares_them(fresh_dsn):
    worker = await Worker(declares(5)).start()
    first, runs = await one_then_more(fresh_dsn, worker, f"*={worker.url}", 12)  # no batch option: auto
    # before any answer: one message per request, with its Idempotency-Key (what every worker gets)
    assert not worker.received[0].body.startswith(b"[") and worker.received[0].key == f"{first[0]}:1"
    later = worker.received[1:]
    assert all(r.body.startswith(b"[") and 1 <= len(r.messages) <= 5 for r in later), [len(r.messages) for r in later]
    assert len(later) == 3  # 12 claimed at once: 5 + 5 + 2
    assert sorted(worker.keys()) == sorted(f"{r}:1" for r in first + runs)


async def test_an_explicit_batch_size_ignores_what_the_worker_declares(fresh_dsn):
    worker = await Worker(declares(50)).start()
    await one_then_more(fresh_dsn, worker, f"*={worker.url} batch=1", 6)
    assert [len(r.messages) for r in worker.received] == [1] * 7
    assert not any(r.body.startswith(b"[") for r in worker.received)


async def test_a_replaced_worker_that_refuses_batches_gets_them_one_by_one_and_none_is_dead(fresh_dsn):
    flag: dict = {"batch": 5}
    worker = await Worker(declares(5, flag)).start()
    # then a new deployment behind the same URL: single messages only
    _, runs = await one_then_more(fresh_dsn, worker, f"*={worker.url}", 7, lambda: flag.update(batch=None))
    refused = [r for r in worker.received[1:] if r.body.startswith(b"[")]
    singles = [r for r in worker.received[1:] if not r.body.startswith(b"[")]
    assert refused, "the relay should have tried a batch first"
    assert sorted(r.key for r in singles) == sorted(f"{r}:1" for r in runs)  # each once more, alone
    assert (await query(fresh_dsn, "SELECT count(*) FROM cronbox.dead_letters")) == [(0,)]


async def test_signed_requests_verify_with_the_shared_secret(fresh_dsn, monkeypatch):
    monkeypatch.setenv("TEST_WORKER_SECRET", "s3cret")
    verdicts: list[bool] = []

    async def check(request: web.Request, body: bytes) -> web.StreamResponse:
        try:
            verify("s3cret", body, request.headers.get(HEADER))
            verdicts.append(True)
        except ValueError:
            verdicts.append(False)
        return web.Response(status=202)

    worker = await Worker(check).start()
    relay = RunningRelay(fresh_dsn, f"a={worker.url} secret_env=TEST_WORKER_SECRET; b={worker.url} batch=3 secret_env=TEST_WORKER_SECRET")
    try:
        with db.connect(fresh_dsn) as conn:
            enqueue(conn, 2, queue="a")
            enqueue(conn, 5, queue="b")
        await eventually(lambda: outbox_empty(fresh_dsn), what="outbox drained")
    finally:
        await relay.stop()
        await worker.stop()
    assert verdicts and all(verdicts)
    assert len(worker.keys()) == 7


async def test_an_outcome_in_the_answer_completes_the_run_in_the_same_step(fresh_dsn):
    worker = await Worker(answer_json({"state": "failed", "error": "boom", "retryable": False})).start()
    relay = RunningRelay(fresh_dsn, f"*={worker.url}")
    try:
        with db.connect(fresh_dsn) as conn:
            runs = enqueue(conn, 2, job="outcome")
        await eventually(lambda: outbox_empty(fresh_dsn), what="outbox drained")
    finally:
        await relay.stop()
        await worker.stop()
    assert set((await states(fresh_dsn, runs)).values()) == {("failed", "boom")}
    assert (await query(fresh_dsn, "SELECT active_runs FROM cronbox.schedules WHERE name = 'outcome'")) == [(0,)]


async def test_a_worker_failing_with_500_for_a_while_gets_every_message_once_it_recovers(fresh_dsn):
    statuses: list[tuple[str, int]] = []

    async def flaky(request: web.Request, body: bytes) -> web.StreamResponse:
        status = 500 if len(statuses) < 15 else 202
        statuses.append((request.headers["Idempotency-Key"], status))
        return web.Response(status=status, text="down for maintenance" if status == 500 else "")

    worker = await Worker(flaky).start()
    relay = RunningRelay(fresh_dsn, f"*={worker.url}")
    try:
        with db.connect(fresh_dsn) as conn:
            runs = enqueue(conn, 10)
        await eventually(lambda: outbox_empty(fresh_dsn), what="outbox drained")
    finally:
        await relay.stop()
        await worker.stop()
    assert sum(1 for _, s in statuses if s == 500) == 15
    assert sorted(k for k, s in statuses if s == 202) == sorted(f"{r}:1" for r in runs)  # each accepted once
    assert {s for s, _ in (await states(fresh_dsn, runs)).values()} == {"delivered"}
    assert (await query(fresh_dsn, "SELECT count(*) FROM cronbox.dead_letters")) == [(0,)]


async def test_a_worker_answering_400_dead_letters_its_messages_and_others_are_unaffected(fresh_dsn):
    bad = await Worker(answer_json({"error": "unknown job"}, status=400)).start()
    good = await Worker().start()
    relay = RunningRelay(fresh_dsn, f"bad={bad.url}; good={good.url}")
    try:
        with db.connect(fresh_dsn) as conn:
            bad_runs = enqueue(conn, 3, queue="bad")
            good_runs = enqueue(conn, 5, queue="good")
        await eventually(lambda: outbox_empty(fresh_dsn), what="outbox drained")
    finally:
        await relay.stop()
        await bad.stop()
        await good.stop()
    assert len(bad.received) == 3  # one attempt each: a 400 is final
    assert sorted(good.keys()) == sorted(f"{r}:1" for r in good_runs)
    assert {s for s, _ in (await states(fresh_dsn, good_runs)).values()} == {"delivered"}
    dead = await query(fresh_dsn, "SELECT run_id, queue, last_error FROM cronbox.dead_letters ORDER BY run_id")
    assert [(r, q) for r, q, _ in dead] == [(r, "bad") for r in bad_runs]
    assert all(e.startswith("HTTP 400") and "unknown job" in e for _, _, e in dead)
    assert {s for s, _ in (await states(fresh_dsn, bad_runs)).values()} == {"failed"}


async def test_a_hanging_worker_times_out_and_the_message_is_retried(fresh_dsn):
    release = asyncio.Event()
    calls: list[float] = []
    seen_by_retry: list[tuple] = []

    async def hang_first(request: web.Request, body: bytes) -> web.StreamResponse:
        calls.append(time.monotonic())
        if len(calls) == 1:
            await release.wait()  # never answers the first attempt
        else:  # what the relay recorded of the first attempt before sending it again
            seen_by_retry.extend(await query(fresh_dsn, "SELECT attempts, last_error FROM cronbox.outbox"))
        return web.Response(status=202)

    worker = await Worker(hang_first).start()
    relay = RunningRelay(fresh_dsn, f"*={worker.url} timeout=300ms")
    try:
        with db.connect(fresh_dsn) as conn:
            (run,) = enqueue(conn, 1)
        await eventually(lambda: outbox_empty(fresh_dsn), what="outbox drained")
    finally:
        release.set()
        await relay.stop()
        await worker.stop()
    assert worker.keys() == [f"{run}:1", f"{run}:1"]
    # The retry came because the request timed out (the relay's 300 ms timeout, not a lease or a
    # second claim). Arrival times seen by the worker are no measure of it: relay, worker and this
    # test share one event loop, so a loaded machine delays the first handler, not the timeout.
    assert seen_by_retry == [(2, "timeout: no answer within the request timeout")]  # 2nd claim
    assert calls[1] > calls[0]
    assert (await states(fresh_dsn, [run]))[run] == ("delivered", None)


async def test_a_worker_that_is_down_keeps_the_backlog_until_it_starts(fresh_dsn):
    port = free_port()
    worker = Worker(port=port)
    relay = RunningRelay(fresh_dsn, f"*={worker.url}")
    try:
        with db.connect(fresh_dsn) as conn:
            runs = enqueue(conn, 5)

        async def retried() -> bool:
            rows = await query(fresh_dsn, "SELECT min(attempts), min(last_error) FROM cronbox.outbox")
            return rows[0][0] is not None and rows[0][0] >= 2 and "Connect" in rows[0][1]

        await eventually(retried, what="failed attempts on every row")
        await worker.start()
        await eventually(lambda: outbox_empty(fresh_dsn), what="backlog delivered")
    finally:
        await relay.stop()
        await worker.stop()
    assert sorted(worker.keys()) == sorted(f"{r}:1" for r in runs)
    assert {s for s, _ in (await states(fresh_dsn, runs)).values()} == {"delivered"}


async def test_429_waits_at_least_retry_after(fresh_dsn):
    calls: list[float] = []

    async def busy_once(request: web.Request, body: bytes) -> web.StreamResponse:
        calls.append(time.monotonic())
        if len(calls) == 1:
            return web.Response(status=429, headers={"Retry-After": "1"})
        return web.Response(status=202)

    worker = await Worker(busy_once).start()
    relay = RunningRelay(fresh_dsn, f"*={worker.url}")
    try:
        with db.connect(fresh_dsn) as conn:
            enqueue(conn, 1)
        await eventually(lambda: outbox_empty(fresh_dsn), what="outbox drained")
    finally:
        await relay.stop()
        await worker.stop()
    assert len(calls) == 2 and calls[1] - calls[0] >= 0.9  # backoff alone would be <= 0.2 s


async def test_notifications_route_like_any_queue_to_the_log_sink(fresh_dsn, caplog):
    relay = RunningRelay(fresh_dsn, "alerts=log; *=elsewhere")
    try:
        with caplog.at_level(logging.INFO, logger="cronbox.relay"), db.connect(fresh_dsn) as conn:
            notify_row(conn, "alerts", {"event": "run_failed", "job": "nightly", "idempotency_key": "n:1"})
            enqueue(conn, 1, queue="pulled")
            await eventually(lambda: _no_alerts(fresh_dsn), what="notification sent")
    finally:
        await relay.stop()
    logged = [getattr(r, "fields", {}) for r in caplog.records if r.getMessage() == "message"]
    assert any(f["message"]["event"] == "run_failed" and f["idempotency_key"] == "n:1" for f in logged)
    # the `elsewhere` queue was never claimed: its row waits untouched for another relay
    assert await query(fresh_dsn, "SELECT queue, attempts FROM cronbox.outbox") == [("pulled", 0)]


async def _no_alerts(dsn: str) -> bool:
    return not await query(dsn, "SELECT 1 FROM cronbox.outbox WHERE queue = 'alerts'")


async def test_an_unrouted_queue_at_start_is_a_configuration_error(fresh_dsn):
    from cronbox.config import ConfigError

    with db.connect(fresh_dsn) as conn:
        enqueue(conn, 1, queue="orphan")
    relay = RunningRelay(fresh_dsn, "default=log")
    with pytest.raises(ConfigError, match="'orphan' have no route"):
        await asyncio.wait_for(relay.task, 10)


async def test_notifications_never_go_to_a_worker_through_the_catch_all_route(fresh_dsn, caplog):
    worker = await Worker().start()
    relay = RunningRelay(fresh_dsn, f"*={worker.url}")
    try:
        with caplog.at_level(logging.INFO, logger="cronbox.relay"), db.connect(fresh_dsn) as conn:
            notify_row(conn, "cronbox.notifications", {"event": "schedule_paused", "job": "j", "idempotency_key": "p:1"})
            runs = enqueue(conn, 3)
            await eventually(lambda: query_empty(fresh_dsn), what="outbox drained")
    finally:
        await relay.stop()
        await worker.stop()
    assert sorted(worker.keys()) == sorted(f"{r}:1" for r in runs)
    assert not any("event" in m for r in worker.received for m in r.messages)  # the worker got runs only
    logged = [getattr(r, "fields", {}) for r in caplog.records if r.getMessage() == "message"]
    assert [f["message"]["event"] for f in logged] == ["schedule_paused"]


async def test_a_named_notification_route_receives_them(fresh_dsn):
    worker, hook = await Worker().start(), await Worker().start()
    relay = RunningRelay(fresh_dsn, f"*={worker.url}; cronbox.notifications={hook.url}")
    try:
        with db.connect(fresh_dsn) as conn:
            notify_row(conn, "cronbox.notifications", {"event": "run_failed", "job": "j", "idempotency_key": "f:1"})
            await eventually(lambda: query_empty(fresh_dsn), what="outbox drained")
    finally:
        await relay.stop()
        await worker.stop()
        await hook.stop()
    assert [m["event"] for r in hook.received for m in r.messages] == ["run_failed"]
    assert worker.received == []


async def _true(value: bool) -> bool:
    return value


async def query_empty(dsn: str) -> bool:
    return (await query(dsn, "SELECT count(*) FROM cronbox.outbox WHERE coalesce(state, 'dispatched') = 'dispatched'"))[0][0] == 0


async def test_an_open_breaker_shows_in_healthz_metrics_and_processes_then_closes(fresh_dsn):
    from prometheus_client import REGISTRY

    from cronbox import metrics

    failing = True

    async def answer(request: web.Request, body: bytes) -> web.StreamResponse:
        return web.Response(status=503 if failing else 202)

    worker = await Worker(answer).start()
    slow_probe = RelaySettings(max_attempts=1000, backoff=0.05, backoff_max=0.2, http_timeout=2.0,
                               breaker_failures=3, breaker_probe=0.3, breaker_probe_max=0.6)
    relay = RunningRelay(fresh_dsn, f"flaky={worker.url}", settings=slow_probe)
    try:
        with db.connect(fresh_dsn) as conn:
            runs = enqueue(conn, 20, queue="flaky")

        async def open_everywhere() -> bool:
            checks = {name: (ok, detail) for name, ok, detail in metrics.extra_health()}
            info = await query(fresh_dsn, "SELECT info FROM cronbox.processes WHERE kind = 'relay'")
            gauge = REGISTRY.get_sample_value("cronbox_relay_breaker_open", {"queue": "flaky"})
            return (checks.get("relay_breakers", (False, ""))[1].startswith("open: flaky")
                    and bool(info) and info[0][0].get("breakers", {}).get("flaky", {}).get("state") == "open"
                    and gauge == 1)
        await eventually(lambda: _true(REGISTRY.get_sample_value("cronbox_relay_breaker_open", {"queue": "flaky"}) == 1),
                         what="breaker open")
        opened, sent_before = time.monotonic(), len(worker.received)
        await eventually(open_everywhere, what="breaker open in /healthz, processes and /metrics")
        # open: the queue is probed (one request per >= 0.27 s), not hammered; nothing dead-lettered
        assert len(worker.received) - sent_before <= (time.monotonic() - opened) / 0.27 + 2
        assert (await query(fresh_dsn, "SELECT count(*) FROM cronbox.dead_letters")) == [(0,)]
        failing = False
        await eventually(lambda: outbox_empty(fresh_dsn), what="backlog drained after recovery")
        assert REGISTRY.get_sample_value("cronbox_relay_breaker_open", {"queue": "flaky"}) == 0
        assert {name: detail for name, _, detail in metrics.extra_health()}["relay_breakers"] == "all closed"
    finally:
        await relay.stop()
        await worker.stop()
    assert {s for s, _ in (await states(fresh_dsn, runs)).values()} == {"delivered"}
