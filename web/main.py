"""`cronbox web`: serve the console until SIGTERM/SIGINT."""

from __future__ import annotations

import asyncio
import logging

from aiohttp import web
from psycopg_pool import AsyncConnectionPool

from cronbox import db
from cronbox.config import Config, ConfigError
from cronbox.log import event
from cronbox.proc import Waker
from web.app import build
from web.settings import WebSettings

log = logging.getLogger("cronbox.web")


async def serve(dsn: str, settings: WebSettings, stop: asyncio.Event) -> None:
    pool = await db.open_pool(dsn, min_size=1, max_size=settings.pool, name="web")
    runner: web.AppRunner | None = None
    try:
        await check_roles(pool, settings)
        app = build(settings, pool)
        # SIGTERM: stop within a few seconds even with browsers holding keep-alive connections
        runner = web.AppRunner(app, access_log=None, handle_signals=False, shutdown_timeout=3.0)
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
        event(log, "web console stopped")


async def check_roles(pool: AsyncConnectionPool, settings: WebSettings) -> None:
    """Refuse to start when a console user's role does not exist or cannot be SET ROLE to."""
    async with pool.connection() as conn:
        for role in sorted({u.role for u in settings.users.values()}):
            cur = await conn.execute(
                "SELECT r.oid IS NOT NULL, r.oid IS NOT NULL AND pg_catalog.pg_has_role(r.oid, 'MEMBER') "
                "FROM (SELECT 1) x LEFT JOIN pg_catalog.pg_roles r ON r.rolname = %s", (role,))
            exists, member = await cur.fetchone()  # type: ignore[misc]
            if not exists:
                raise ConfigError(f"CRONBOX_WEB_USERS: database role {role!r} does not exist")
            if not member:
                raise ConfigError(f"CRONBOX_WEB_USERS: the login role may not SET ROLE {role!r} "
                                  f"(GRANT {role} TO <the DATABASE_URL role>)")


async def run(cfg: Config, waker: Waker, settings: WebSettings) -> None:
    await serve(cfg.dsn, settings, waker.stop)
