"""The demo worker: a push-mode worker written with the public worker kit, as a user would.

`cronbox demo-worker` and `cronbox dev` serve it over HTTP for the relay; it logs every run
it receives and completes it with a small result (answered straight to the relay, so the
run completes in the relay's ack). It handles every queue ('*'). A readable example of
`cronbox.worker`; see docs/worker.md. It imports nothing but the public kit (`cronbox.worker`),
aiohttp and the standard library, as a user's service would.
"""

from __future__ import annotations

import asyncio
import logging

from aiohttp import web

from cronbox.worker import Run, Worker

log = logging.getLogger("cronbox.demo")
NAME = "demo-worker"


def make_worker(**settings: object) -> Worker:
    worker = Worker(name=NAME, **settings)

    @worker.handler("*")
    async def handle(run: Run) -> dict:
        log.info("received run_id=%s job=%s queue=%s fire_at=%s attempt=%s", run.run_id, run.job, run.queue,
                 run.fire_at.isoformat() if run.fire_at else None, run.attempt)
        result = {"ok": True, "worker": NAME}
        log.info("completed run_id=%s job=%s result=%s", run.run_id, run.job, result)
        return result

    return worker


worker = make_worker()  # `cronbox worker cronbox.demo_worker:worker --port 8080` works too


async def serve(host: str, port: int, stop: asyncio.Event, *, dsn: str | None = None,
                secret: str | None = None) -> None:
    """Serve the demo worker until `stop` is set. Without a secret (argument or
    CRONBOX_WORKER_SECRET) it accepts unsigned requests: it is a demo."""
    demo = make_worker(dsn=dsn) if dsn else worker
    unsigned = not (secret or demo.settings.secret)
    if unsigned:
        log.warning("accepting unsigned requests (set CRONBOX_WORKER_SECRET and the route's secret_env)")
    runner = web.AppRunner(demo.http_app(secret=secret, allow_unsigned=unsigned), access_log=None)
    await runner.setup()
    try:
        await web.TCPSite(runner, host, port).start()
        log.info("listening url=http://%s:%s/run", host, port)
        await stop.wait()
    finally:
        await runner.cleanup()
