"""`cronbox web`: serve the console until SIGTERM/SIGINT."""

from __future__ import annotations

import asyncio
import logging
import os

from aiohttp import web

from cronbox import db
from cronbox.config import Config
from cronbox.log import event
from cronbox.proc import Waker
from web.app import build
from web.settings import WebSettings

log = logging.getLogger("cronbox.web")


async def serve(dsn: str, settings: WebSettings, stop: asyncio.Event) -> None:
    pool = await db.open_pool(dsn, min_size=1, max_size=int(os.environ.get("CRONBOX_WEB_POOL", "4")), name="web")
    runner: web.AppRunner | None = None
    try:
        app = build(settings, pool)
        runner = web.AppRunner(app, access_log=None, handle_signals=False)
        await runner.setup()
        site = web.TCPSite(runner, settings.host, settings.port)
        await site.start()
        port = runner.addresses[0][1] if runner.addresses else settings.port
        host = settings.host if ":" not in settings.host else f"[{settings.host}]"
        event(log, "web console listening", url=f"http://{host}:{port}/", **settings.describe())
        await stop.wait()
    finally:
        if runner is not None:
            await runner.cleanup()
        await pool.close()


async def run(cfg: Config, waker: Waker, settings: WebSettings) -> None:
    await serve(cfg.dsn, settings, waker.stop)
