"""The bench worker: an HTTP endpoint the relay delivers to, in its own process.

POST /run takes one message (a JSON object) or a batch (a JSON array). Modes:
  report-sql  answer 202 at once, then complete the runs through SQL with the public worker
              function cronbox.complete_run, once per run: by default one transaction per run
              (--reporters connections at once); --report-tx batch puts --report-batch
              runs in one transaction (fewer commits, but it can deadlock with the relay's
              ack of the same runs: retried here, and reported).
  respond     answer with the outcome, {"state": "succeeded"} (an array of them, in order,
              for a batch), so a relay that supports it completes the runs in its ack.
  accept      answer 202 and do nothing else (delivery only).
With --accept-batch N, every answer carries `Cronbox-Accept-Batch: N`, as the worker kit's do:
a relay route with the default batch=auto then sends arrays of up to N messages.
With --record, every message's arrival time (time.time(), the same clock the database
uses on this machine) is kept and written as JSON lines to --record on exit (SIGTERM).
GET /stats returns counts: requests, messages, batches seen, completions reported.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import time
from typing import Any

import orjson
import psycopg
from aiohttp import web

from cronbox import db

SUCCEEDED = orjson.dumps({"state": "succeeded"})


class Worker:
    def __init__(self, dsn: str, mode: str, report_batch: int, reporters: int, record: str | None,
                 report_tx: str = "per-run", accept_batch: int = 0):
        self.dsn = dsn
        self.headers = {"Cronbox-Accept-Batch": str(accept_batch)} if accept_batch else None
        self.mode = mode
        self.report_batch = report_batch
        self.report_tx = report_tx
        self.reporters = reporters
        self.record_path = record
        self.records: list[tuple[float, Any, Any, Any, Any]] = []
        self.pending: asyncio.Queue[int] = asyncio.Queue()
        self.stats = {"requests": 0, "messages": 0, "array_requests": 0, "max_batch": 0,
                      "reported": 0, "report_errors": 0, "report_retries": 0, "report_transactions": 0, "last_error": None}
        self.pool: Any = None

    async def handle(self, request: web.Request) -> web.Response:
        now = time.time()
        body = orjson.loads(await request.read())
        messages = body if isinstance(body, list) else [body]
        st = self.stats
        st["requests"] += 1
        st["messages"] += len(messages)
        if isinstance(body, list):
            st["array_requests"] += 1
        st["max_batch"] = max(st["max_batch"], len(messages))
        if self.record_path is not None:
            for m in messages:
                self.records.append((now, m.get("run_id"), m.get("job"), m.get("fire_at"), m.get("attempt")))
        if self.mode == "respond":
            if isinstance(body, list):
                out = orjson.dumps([{"run_id": m.get("run_id"), "state": "succeeded"} for m in messages])
            else:
                out = SUCCEEDED
            return web.Response(body=out, content_type="application/json", headers=self.headers)
        if self.mode == "report-sql":
            for m in messages:
                self.pending.put_nowait(int(m["run_id"]))
        return web.Response(status=202, body=b'{"accepted":true}', content_type="application/json",
                            headers=self.headers)

    async def stats_handler(self, request: web.Request) -> web.Response:
        return web.Response(body=orjson.dumps({**self.stats, "pending": self.pending.qsize(), "pid": os.getpid()}),
                            content_type="application/json")

    async def reporter(self) -> None:
        """Complete the received runs with cronbox.complete_run, once per run.

        per-run: one transaction per run (as cronbox's demo worker); --reporters connections
        report concurrently (their commits share WAL flushes: group commit).
        batch: one transaction per --report-batch runs (ids sorted), retried on deadlock.
        """
        while True:
            ids = [await self.pending.get()]
            while len(ids) < self.report_batch and not self.pending.empty():
                ids.append(self.pending.get_nowait())
            for attempt in range(5):
                try:
                    async with self.pool.connection() as conn:
                        if self.report_tx == "batch":
                            async with conn.transaction():
                                await conn.execute("SELECT count(cronbox.complete_run(r)) "
                                                   "FROM unnest(%s::bigint[]) AS r", (sorted(ids),))
                            self.stats["report_transactions"] += 1
                        else:
                            # not pipelined: statements before one Sync share an implicit
                            # transaction, which would hold job-row locks across runs
                            for run_id in ids:
                                await conn.execute("SELECT cronbox.complete_run(%s)", (run_id,))
                            self.stats["report_transactions"] += len(ids)
                    self.stats["reported"] += len(ids)
                    break
                except (psycopg.errors.DeadlockDetected, psycopg.errors.SerializationFailure) as exc:
                    self.stats["report_retries"] += 1
                    self.stats["last_error"] = str(exc).strip()[:300]
                except psycopg.Error as exc:
                    self.stats["report_errors"] += 1
                    self.stats["last_error"] = str(exc).strip()[:300]
                    break

    def dump(self) -> None:
        if self.record_path is None:
            return
        with open(self.record_path, "wb") as f:
            for r in self.records:
                f.write(orjson.dumps(r) + b"\n")


async def main(args: argparse.Namespace) -> None:
    w = Worker(os.environ["DATABASE_URL"], args.mode, args.report_batch, args.reporters, args.record,
               args.report_tx, args.accept_batch)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    tasks: list[asyncio.Task[None]] = []
    if args.mode == "report-sql":
        w.pool = await db.open_pool(w.dsn, min_size=args.reporters, max_size=args.reporters, name="bench-worker")
        tasks = [asyncio.create_task(w.reporter()) for _ in range(args.reporters)]
    app = web.Application(client_max_size=256 * 2**20)
    app.router.add_post("/run", w.handle)
    app.router.add_get("/stats", w.stats_handler)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", args.port, backlog=1024).start()
    print(f"listening on 127.0.0.1:{args.port} mode={args.mode}", flush=True)
    await stop.wait()
    await runner.cleanup()
    for t in tasks:
        t.cancel()
    if w.pool is not None:
        await w.pool.close()
    w.dump()


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--mode", choices=("report-sql", "respond", "accept"), default="report-sql")
    p.add_argument("--report-tx", choices=("per-run", "batch"), default="per-run",
                   help="per-run: a transaction per complete_run (pipelined); batch: one per --report-batch runs")
    p.add_argument("--report-batch", type=int, default=50)
    p.add_argument("--reporters", type=int, default=8, help="concurrent reporting connections")
    p.add_argument("--accept-batch", type=int, default=0,
                   help="declare batches of up to N in every answer (Cronbox-Accept-Batch); 0: declare nothing")
    p.add_argument("--record", help="write arrival records (JSON lines) here on exit")
    asyncio.run(main(p.parse_args()))
