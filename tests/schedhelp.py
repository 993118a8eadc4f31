"""Helpers for the schedule tests: call cronbox.schedule() with named arguments, run a real
saturation pass (poller/saturate.py) at a chosen `now`, and read futures and missed fires."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import datetime, timedelta, timezone
from typing import Any

import psycopg
import pytest_asyncio
from psycopg import sql

from poller.saturate import saturate_once

UTC = timezone.utc


@pytest_asyncio.fixture
async def aconn(shared_dsn: str) -> AsyncIterator[psycopg.AsyncConnection]:
    """An async connection inside a transaction rolled back after the test (empty search_path)."""
    c = await psycopg.AsyncConnection.connect(shared_dsn, autocommit=False, prepare_threshold=None)
    try:
        await c.execute("SELECT 1")  # open the transaction: transaction() blocks become savepoints
        yield c
    finally:
        await c.rollback()
        await c.close()


def utc(*args: int) -> datetime:
    return datetime(*args, tzinfo=UTC)


async def schedule(conn: psycopg.AsyncConnection, **args: Any) -> int:
    """cronbox.schedule(); with p_now, the internal cronbox.schedule_at (the test clock)."""
    fn = "schedule_at" if "p_now" in args else "schedule"
    q = sql.SQL("SELECT cronbox.{}({})").format(sql.Identifier(fn),
        sql.SQL(", ").join(sql.SQL("{} => {}").format(sql.Identifier(k), sql.Placeholder(k)) for k in args))
    cur = await conn.execute(q, args)
    return (await cur.fetchone())[0]


async def saturate(conn: psycopg.AsyncConnection, now: datetime, *, horizon: timedelta = timedelta(minutes=2),
                   grace: timedelta = timedelta(seconds=30), batch: int = 1000) -> tuple[int, int, int]:
    """Saturation passes at `now` until no job is left to claim; returns the summed counts."""
    total = [0, 0, 0]
    while True:
        claimed, futures, missed = await saturate_once(conn, batch=batch, horizon=horizon, grace=grace, now=now)
        total = [total[0] + claimed, total[1] + futures, total[2] + missed]
        if claimed == 0:
            return total[0], total[1], total[2]


async def rows(conn: psycopg.AsyncConnection, query: str, *params: Any) -> list[Any]:
    cur = await conn.execute(query, params)
    return [r[0] if len(r) == 1 else r for r in await cur.fetchall()]


async def one(conn: psycopg.AsyncConnection, query: str, *params: Any) -> Any:
    cur = await conn.execute(query, params)
    row = await cur.fetchone()
    return row[0] if row is not None and len(row) == 1 else row


async def futures(conn: psycopg.AsyncConnection, name: str, origin: str = "schedule") -> list[datetime]:
    return await rows(conn, "SELECT f.fire_at FROM cronbox.job_future f JOIN cronbox.job j USING (bucket, job_id) "
                            "WHERE j.name = %s AND f.origin = %s ORDER BY f.fire_at", name, origin)


async def gaps(conn: psycopg.AsyncConnection, name: str) -> list[tuple[datetime, datetime, int]]:
    """The job's missed rows, one per gap: (first fire, last fire, count)."""
    return await rows(conn, "SELECT fire_at, missed_last_at, missed_fires FROM cronbox.runs "
                            "WHERE job = %s AND state = 'missed' ORDER BY fire_at", name)


async def missed(conn: psycopg.AsyncConnection, name: str) -> list[datetime]:
    """The missed fires, expanded from the gap rows (the schedules these tests use fire at a
    regular spacing, so a gap's fires are evenly spread from its first to its last)."""
    out: list[datetime] = []
    for first, last, n in await gaps(conn, name):
        step = (last - first) / (n - 1) if n > 1 else timedelta(0)
        out += [first + k * step for k in range(n)]
    return out


async def changes(conn: psycopg.AsyncConnection, name: str) -> list[tuple[str, str, str]]:
    return await rows(conn, "SELECT action, reason, changed_by FROM cronbox.schedule_changes "
                            "WHERE job = %s ORDER BY change_id", name)
