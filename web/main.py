"""`cronbox web`: serve the console until SIGTERM/SIGINT."""

from __future__ import annotations

import asyncio
import logging

import psycopg
from aiohttp import web
from psycopg_pool import AsyncConnectionPool

from cronbox import db
from cronbox.config import Config, ConfigError
from cronbox.log import event
from cronbox.proc import Waker, identity
from cronbox.registry import keep_registered
from web.app import build
from web.settings import WebSettings

log = logging.getLogger("cronbox.web")


async def serve(dsn: str, settings: WebSettings, stop: asyncio.Event) -> None:
    pool = await db.open_pool(dsn, min_size=1, max_size=settings.pool, name="web")
    runner: web.AppRunner | None = None
    registry: asyncio.Task[None] | None = None
    unregister = asyncio.Event()
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
        url = f"http://{host}:{port}/"
        event(log, "web console listening", url=url, **settings.describe())
        registry = await start_registry(pool, {"url": url, "logins": len(settings.users)}, unregister)
        await stop.wait()
    finally:
        if runner is not None:
            await runner.cleanup()
        if registry is not None:  # a clean stop removes this console from cronbox.processes
            unregister.set()
            try:
                await asyncio.wait_for(registry, 5)
            except (Exception, asyncio.CancelledError):  # noqa: BLE001  (the entry only: shown as gone)
                pass
        await pool.close()
        event(log, "web console stopped")


async def registry_role(pool: AsyncConnectionPool) -> tuple[bool, str | None]:
    """Whether this console may register itself in cronbox.processes, and under which role:
    directly (its login role may execute cronbox.register_console), or through SET ROLE
    cronbox_web (a member that does not inherit it, like the NOINHERIT console role of
    docs/operations.md), or not at all (an older schema, a role without cronbox_web)."""
    async with pool.connection() as conn:
        # by the catalog, not to_regprocedure: a NOINHERIT role has no USAGE on the schema
        cur = await conn.execute(
            "SELECT coalesce((SELECT pg_catalog.has_function_privilege(p.oid, 'EXECUTE')"
            "                 FROM pg_catalog.pg_proc p WHERE p.pronamespace = to_regnamespace('cronbox')"
            "                   AND p.proname = 'register_console'), false),"
            "       CASE WHEN to_regrole('cronbox_web') IS NULL THEN false"
            "            ELSE pg_catalog.pg_has_role(to_regrole('cronbox_web'), 'MEMBER') END,"
            "       current_user")
        direct, member, me = await cur.fetchone()  # type: ignore[misc]
    if direct:
        return True, None
    if member:
        return True, "cronbox_web"
    event(log, "not shown in cronbox.processes", level=logging.WARNING, role=me,
          hint=f"the console's role may not call cronbox.register_console: GRANT cronbox_web TO {me}")
    return False, None


async def start_registry(pool: AsyncConnectionPool, info: dict, stop: asyncio.Event) -> asyncio.Task[None] | None:
    """This console in cronbox.processes (kind console) while it runs: registered at start,
    heartbeat every 5 s, removed at a clean stop. A database that refuses it only costs the entry."""
    may, role = await registry_role(pool)
    if not may:
        return None

    async def keep() -> None:
        try:
            await keep_registered(pool, "console", identity("console"), stop, info=info, role=role)
        except psycopg.Error as exc:
            event(log, "not shown in cronbox.processes", level=logging.WARNING, error=db.explain(exc))

    return asyncio.create_task(keep(), name="registry")


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
