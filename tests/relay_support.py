"""Helpers for the relay tests: put runs into the outbox through the real dispatch, and a
recording HTTP worker (aiohttp on 127.0.0.1) whose answers a test can script."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

import orjson
import psycopg
from aiohttp import web


def enqueue(conn: psycopg.Connection, n: int, *, queue: str = "default", job: str | None = None,
            timeout: str = "5 minutes") -> list[int]:
    """n runs of one job dispatched into the outbox by cronbox.dispatch, in the job's bucket;
    returns their run ids."""
    job = job or f"relay-{queue}"
    row = conn.execute("SELECT job_id FROM cronbox.job WHERE name = %s", (job,)).fetchone()
    if row is None:
        row = conn.execute(
            "SELECT cronbox.schedule(%s, at => now() + interval '1 day', queue => %s, overlap => 'allow', "
            "timeout => %s::interval)", (job, queue, timeout)).fetchone()
    job_id = row[0]
    done = conn.execute("SELECT count(*) FROM cronbox.runs WHERE job_id = %s", (job_id,)).fetchone()[0]
    conn.execute(
        "INSERT INTO cronbox.job_future (job_id, fire_at, due_at, origin, bucket) "
        "SELECT j.job_id, timestamptz '2020-01-01 00:00Z' + (%s + g) * interval '1 second', now() - interval '1 second', "
        "'manual', j.bucket FROM cronbox.job j, generate_series(1, %s) g WHERE j.job_id = %s", (done, n, job_id))
    conn.execute("SELECT cronbox.dispatch(%s)", (n + 1000,))
    rows = conn.execute(
        "SELECT run_id FROM cronbox.runs WHERE job_id = %s AND fire_at > timestamptz '2020-01-01 00:00Z' + %s * interval '1 second' "
        "ORDER BY run_id", (job_id, done)).fetchall()
    assert len(rows) == n, f"dispatched {len(rows)} of {n}"
    return [r[0] for r in rows]


def notify_row(conn: psycopg.Connection, queue: str, message: dict) -> int:
    """A notification message (no run) written to the outbox like the SQL functions do."""
    return conn.execute(
        "INSERT INTO cronbox.outbox (queue, kind, message) VALUES (%s, 'notification', %s) RETURNING outbox_id",
        (queue, orjson.dumps(message).decode())).fetchone()[0]


Answer = Callable[[web.Request, bytes], Awaitable[web.StreamResponse]]


@dataclass
class Received:
    key: str | None
    body: bytes
    headers: dict[str, str]

    @property
    def messages(self) -> list[dict]:
        doc = orjson.loads(self.body)
        return doc if isinstance(doc, list) else [doc]


@dataclass
class Worker:
    """An HTTP worker on 127.0.0.1 recording every request; `answer` decides the response."""

    answer: Answer | None = None
    received: list[Received] = field(default_factory=list)
    port: int = 0
    _runner: web.AppRunner | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/run"

    def keys(self) -> list[str]:
        """Idempotency keys of the run messages received (notifications carry an `event`)."""
        return [m["idempotency_key"] for r in self.received for m in r.messages if "event" not in m]

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        body = await request.read()
        self.received.append(Received(request.headers.get("Idempotency-Key"), body, dict(request.headers)))
        if self.answer is None:
            return web.json_response({"accepted": True}, status=202)
        return await self.answer(request, body)

    async def start(self, port: int = 0) -> Worker:
        app = web.Application()
        app.router.add_post("/run", self._handle)
        self._runner = web.AppRunner(app, access_log=None, shutdown_timeout=0.1)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", port or self.port)
        await site.start()
        self.port = self._runner.addresses[0][1]
        return self

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None


def recording_answer(arrivals: list[tuple[float, dict]]) -> Answer:
    """An answer that accepts (202) and records each message with its arrival time (time.time())."""
    async def answer(request: web.Request, body: bytes) -> web.StreamResponse:
        now = time.time()
        doc = orjson.loads(body)
        arrivals.extend((now, m) for m in (doc if isinstance(doc, list) else [doc]))
        return web.Response(status=202)
    return answer


class ThreadedWorker:
    """A Worker served from its own event loop thread, for tests that drive subprocesses."""

    def __init__(self, answer: Answer | None = None):
        self.worker = Worker(answer)
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)

    def __enter__(self) -> Worker:
        self.thread.start()
        asyncio.run_coroutine_threadsafe(self.worker.start(), self.loop).result(10)
        return self.worker

    def __exit__(self, *exc: object) -> None:
        asyncio.run_coroutine_threadsafe(self.worker.stop(), self.loop).result(10)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
        self.loop.close()
