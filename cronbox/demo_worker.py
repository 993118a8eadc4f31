"""A demo HTTP worker: receives run messages, "does the work", reports through SQL.

POST /run with a cronbox message -> 202 Accepted, then `cronbox.start_run` and
`cronbox.complete_run` on its own connection. Used by `cronbox dev` and docker-compose;
also a readable example of a worker.
"""

from __future__ import annotations

import asyncio
import logging

import orjson
from aiohttp import web

from cronbox import db
from cronbox.log import event

log = logging.getLogger("cronbox.worker")


def make_app(dsn: str, name: str = "demo-worker") -> web.Application:
    app = web.Application()
    tasks: set[asyncio.Task[None]] = set()

    async def report(message: dict) -> None:
        async with app["pool"].connection() as conn:
            run_id = message["run_id"]
            await conn.execute("SELECT cronbox.start_run(%s, %s)", (run_id, name))
            await conn.execute("SELECT cronbox.complete_run(%s, %s)",
                               (run_id, db.Jsonb({"ok": True, "worker": name})))
        event(log, "completed", run_id=message["run_id"], job=message.get("job"))

    async def handle(request: web.Request) -> web.Response:
        message = orjson.loads(await request.read())
        event(log, "received", run_id=message.get("run_id"), job=message.get("job"),
              fire_at=message.get("fire_at"), attempt=message.get("attempt"))
        task = asyncio.create_task(report(message))
        tasks.add(task)
        task.add_done_callback(tasks.discard)
        return web.json_response({"accepted": True}, status=202)

    async def on_startup(app: web.Application) -> None:
        app["pool"] = await db.open_pool(dsn, min_size=1, max_size=4, name="demo-worker")

    async def on_cleanup(app: web.Application) -> None:
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)
        await app["pool"].close()

    app.router.add_post("/run", handle)
    app.on_startup.append(on_startup)
    app.on_cleanup.append(on_cleanup)
    return app


async def serve(dsn: str, host: str, port: int, stop: asyncio.Event) -> None:
    runner = web.AppRunner(make_app(dsn), access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, host, port)
    await site.start()
    event(log, "listening", url=f"http://{host}:{port}/run")
    try:
        await stop.wait()
    finally:
        await runner.cleanup()
