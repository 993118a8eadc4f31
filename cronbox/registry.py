"""The process registry: a poller, relay or worker registers itself, heartbeats, and deregisters
at a clean exit, so `cronbox.processes` shows who is alive (host, pid, version, last seen).
Workers and the web console use their roles' own functions (cronbox.register_worker,
cronbox.register_console, ...), which touch entries of their kind only.

Run `keep_registered(...)` as a side task. A database outage only delays heartbeats (the
process shows as not live meanwhile); an entry that disappeared is registered again.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
from collections.abc import Callable
from datetime import timedelta

import psycopg
from psycopg import sql

from cronbox import __version__, db
from cronbox.log import event

log = logging.getLogger("cronbox.registry")


# Kinds with functions of their own (granted to their own roles); any other kind is a poller
# or relay and uses cronbox.register_process & co (cronbox_process).
OWN = {"worker", "console"}


async def register(conn: psycopg.AsyncConnection, kind: str, name: str, every: float, info: dict | None = None) -> int:
    args = (name, socket.gethostname(), os.getpid(), __version__, timedelta(seconds=every), db.Jsonb(info or {}))
    if kind in OWN:  # the kind's own function: entries of that kind only
        cur = await conn.execute(f"SELECT cronbox.register_{kind}(%s, %s, %s, %s, %s, %s)", args)
    else:
        cur = await conn.execute("SELECT cronbox.register_process(%s, %s, %s, %s, %s, %s, %s)", (kind, *args))
    row = await cur.fetchone()
    assert row is not None
    return int(row[0])


async def heartbeat(conn: psycopg.AsyncConnection, process_id: int, kind: str = "") -> bool:
    query = f"SELECT cronbox.heartbeat_{kind}(%s)" if kind in OWN else "SELECT cronbox.heartbeat_process(%s)"
    cur = await conn.execute(query, (process_id,))
    row = await cur.fetchone()
    return bool(row and row[0])


async def touch(conn: psycopg.AsyncConnection, process_id: int, info: dict, kind: str = "") -> bool:
    query = f"SELECT cronbox.heartbeat_{kind}(%s, %s)" if kind in OWN else "SELECT cronbox.touch_process(%s, %s)"
    cur = await conn.execute(query, (process_id, db.Jsonb(info)))
    row = await cur.fetchone()
    return bool(row and row[0])


async def deregister(conn: psycopg.AsyncConnection, process_id: int, kind: str = "") -> None:
    query = f"SELECT cronbox.deregister_{kind}(%s)" if kind in OWN else "SELECT cronbox.deregister_process(%s)"
    await conn.execute(query, (process_id,))


@contextlib.asynccontextmanager
async def _as_role(pool, role: str | None):
    """A pooled connection; with `role`, inside a transaction under SET LOCAL ROLE (a login
    role with NOINHERIT, like the console's, uses a granted role's privileges only so)."""
    async with pool.connection() as conn:
        if role is None:
            yield conn
            return
        async with conn.transaction():
            await conn.execute(sql.SQL("SET LOCAL ROLE {}").format(sql.Identifier(role)))
            yield conn


async def keep_registered(pool, kind: str, name: str, stop: asyncio.Event, *,
                          every: float = 5.0, info: dict | Callable[[], dict] | None = None,
                          role: str | None = None) -> None:
    """Register, heartbeat every `every` seconds until stop is set (or cancelled), deregister.
    `info` may be a callable: then each heartbeat also refreshes the info (cronbox.processes).
    `role`: the calls run under SET LOCAL ROLE `role`."""
    process_id: int | None = None
    try:
        while not stop.is_set():
            try:
                async with _as_role(pool, role) as conn:
                    now_info = info() if callable(info) else info
                    if process_id is None or not await (
                            touch(conn, process_id, now_info or {}, kind) if callable(info)
                            else heartbeat(conn, process_id, kind)):
                        process_id = await register(conn, kind, name, every, now_info)
                        event(log, "registered", level=logging.DEBUG, process=name, process_id=process_id)
            except (psycopg.OperationalError, psycopg.InterfaceError) as exc:
                event(log, "heartbeat failed", level=logging.WARNING, process=name, error=db.explain(exc))
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), every)
    finally:
        if process_id is not None:
            with contextlib.suppress(Exception):
                async with asyncio.timeout(2):
                    async with _as_role(pool, role) as conn:
                        await deregister(conn, process_id, kind)
