"""Pull mode (`cronbox worker module:attr`): claim runs with cronbox.claim_runs and handle them.

The loop: claim up to the free slots (at most `batch`) from each handled queue in turn, start
a handler per run, go again at once while claims come back full and slots are free;
otherwise sleep until a NOTIFY on `cronbox_outbox` (sent by every dispatch), a freed slot
when all were taken, or the jittered poll interval. Claims are retried on connection errors
with backoff (tenacity, bounded by time); the listener reconnects by itself. On SIGTERM the
loop stops claiming and the engine finishes in-flight runs within the shutdown timeout.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from typing import TYPE_CHECKING, Any

import psycopg

from cronbox import db, metrics
from cronbox.config import listen_target
from cronbox.log import event
from cronbox.proc import Waker, cancel_quietly, listen
from cronbox.worker.engine import Engine
from cronbox.worker.run import Run

if TYPE_CHECKING:
    from cronbox.worker import Worker

log = logging.getLogger("cronbox.worker")
CLAIM_BUDGET = 60.0  # seconds of connection errors a claim is retried before the process gives up
COALESCE = 0.005     # longest wait for more free slots before claiming fewer than half a batch

CLAIM_SQL = ("SELECT run_id, job, payload, fire_at, attempt, deadline, idempotency_key,"
             " extract(epoch FROM deadline - now())::float8"
             " FROM cronbox.claim_runs(%s, %s, %s, with_message => false)")


async def claim(pool: Any, queue: str, name: str, n: int) -> list[tuple[Run, float | None]]:
    """Up to n runs of the queue, each with the seconds left until its deadline (database clock)."""
    async with pool.connection() as conn:
        cur = await conn.execute(CLAIM_SQL, (queue, name, n))
        rows = await cur.fetchall()
    return [(Run(run_id=r[0], job=r[1], queue=queue, payload=r[2], fire_at=r[3], attempt=r[4],
                 deadline=r[5], idempotency_key=r[6]), r[7]) for r in rows]


async def refuse_unreadable(pool: Any, runs: list[Run]) -> None:
    """Runs whose payload Python cannot load (db.UnreadableJson: a number past a double's
    range, nesting past 1,024 levels) fail at once, not retryable, with the reason: no handler
    sees them, and the worker goes on with the others."""
    for run in runs:
        event(log, "payload unreadable: run failed", level=logging.ERROR, run_id=run.run_id, job=run.job,
              reason=run.payload.reason)
    async with pool.connection() as conn:
        await conn.execute("SELECT cronbox.fail_runs(%s::bigint[], %s::text[], false)",
                           ([r.run_id for r in runs],
                            [f"payload: {r.payload.reason}; the worker kit cannot hand it to a handler"
                             for r in runs]))


async def run_pull(worker: Worker, waker: Waker, metrics_cfg: Any | None = None) -> None:
    s = worker.settings
    queues = [q for q in worker.handlers if q != "*"]
    if not queues:
        raise ValueError("pull mode needs a handler for a named queue (@worker.handler('emails'); "
                         "'*' only catches pushed messages of other queues)")
    event(log, "worker starting", mode="pull", queues=",".join(queues), **s.describe())
    pool = await db.open_pool(s.dsn, min_size=1, max_size=4, name="cronbox-worker", trust_for=db.RECENTLY_GOOD)
    engine = Engine(s, pool)
    engine.start_background()
    listen_dsn = listen_target(s.dsn, s.listen_dsn)
    side = [asyncio.create_task(listen(listen_dsn, ["cronbox_outbox"], waker), name="worker-listen")] if listen_dsn else []
    if metrics_cfg is not None:
        side.append(asyncio.create_task(metrics.serve(metrics_cfg, pool, "worker", waker.stop), name="metrics"))
    turn = 0
    refill = max(1, min(s.batch, s.concurrency) // 2)
    try:
        while not waker.stop.is_set():
            metrics.tick("worker")
            free = s.concurrency - len(engine.inflight)
            if free <= 0 or engine.backlog > s.concurrency:
                engine.slot_freed.clear()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(_first(engine.slot_freed, waker.stop), s.poll_interval)
                continue
            if free < refill and engine.inflight:
                # Slots free up one by one as handlers end: give the others a moment (bounded)
                # so the claim is a batch rather than a run at a time.
                await asyncio.sleep(COALESCE)
                free = s.concurrency - len(engine.inflight)
            full = False
            for i in range(len(queues)):
                queue = queues[(turn + i) % len(queues)]
                want = min(free, s.batch)
                t0 = time.monotonic()
                got = await db.retrying(lambda: claim(pool, queue, s.name, want), budget=CLAIM_BUDGET,
                                        what="claim runs", stop=waker.stop)
                lag = time.monotonic() - t0
                unreadable = [run for run, _ in got if isinstance(run.payload, db.UnreadableJson)]
                for run, remaining in got:
                    if not isinstance(run.payload, db.UnreadableJson):
                        engine.start(run, worker.handlers[queue],
                                     None if remaining is None else remaining - lag)
                if unreadable:
                    try:
                        await db.retrying(lambda: refuse_unreadable(pool, unreadable), budget=CLAIM_BUDGET,
                                          what="fail unreadable runs", stop=waker.stop)
                    except psycopg.Error as exc:  # their lease brings them back: never the process's end
                        event(log, "could not fail unreadable runs", level=logging.ERROR,
                              runs=len(unreadable), error=db.explain(exc))
                free -= len(got)
                full = full or len(got) == want
                if free <= 0:
                    break
            turn += 1
            if not full:
                await waker.sleep(s.poll_interval, jitter=0.1)
    finally:
        event(log, "worker stopping", inflight=len(engine.inflight))
        await engine.close(s.shutdown_timeout)
        await cancel_quietly(*side)
        await pool.close()
        event(log, "worker stopped")


async def _first(*events: asyncio.Event) -> None:
    waits = [asyncio.ensure_future(e.wait()) for e in events]
    try:
        await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for w in waits:
            w.cancel()
