"""The chaos bench's HTTP worker: records every delivery (run id, attempt, idempotency key,
receipt time) as one JSON line, flushed before it answers, then either completes the run in
its answer (`--mode answer`) or answers 202 and completes it through SQL a moment later
(`--mode sql`, a run in flight that dies with the worker when it is killed).

    python -m bench.chaos_worker --port P --record FILE [--mode answer|sql --dsn DSN]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import time

import orjson
import psycopg
from aiohttp import web

from cronbox import db


CONNECTIONS = asyncio.Semaphore(10)  # completions at once: a backlog of re-sends must not use up
                                     # the server's max_connections (it did once, on a starved machine)


async def complete_later(dsn: str, run_id: int, delay: float) -> None:
    await asyncio.sleep(delay)
    for _ in range(100):  # the database may be restarting: retry, bounded
        try:
            async with CONNECTIONS:
                async with await db.aconnect(dsn) as conn:
                    await conn.execute("SELECT cronbox.complete_run(%s)", (run_id,))
            return
        except (psycopg.OperationalError, psycopg.InterfaceError):
            await asyncio.sleep(0.3)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--record", required=True)
    p.add_argument("--mode", choices=("answer", "sql"), default="answer")
    p.add_argument("--dsn", default="")
    p.add_argument("--delay", type=float, default=0.5)
    args = p.parse_args()
    fd = os.open(args.record, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    tasks: set[asyncio.Task[None]] = set()

    async def run(request: web.Request) -> web.Response:
        body = await request.read()
        msg = orjson.loads(body)
        line = {"run_id": msg["run_id"], "attempt": msg["attempt"], "job": msg["job"],
                "fire_at": msg["fire_at"], "key": request.headers.get("Idempotency-Key"),
                "body_key": msg.get("idempotency_key"), "t": time.time(), "pid": os.getpid()}
        os.write(fd, orjson.dumps(line) + b"\n")  # O_APPEND: one line per write, killed or not
        if args.mode == "answer":
            return web.json_response({"state": "succeeded"})
        t = asyncio.create_task(complete_later(args.dsn, msg["run_id"], args.delay))
        tasks.add(t)
        t.add_done_callback(tasks.discard)
        return web.Response(status=202)

    app = web.Application()
    app.add_routes([web.post("/run", run)])
    web.run_app(app, host="127.0.0.1", port=args.port, print=None, access_log=None)


if __name__ == "__main__":
    main()
