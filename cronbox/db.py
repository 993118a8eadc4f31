"""Connections: orjson as psycopg's JSON codec, one async pool per process, clear errors.

Connections are opened with prepare_threshold=None: they may outlive a migration that
changes a result type, or sit behind PgBouncer.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import TypeVar

import orjson
import psycopg
from psycopg.types.json import Jsonb, set_json_dumps, set_json_loads  # noqa: F401  (Jsonb re-exported)
from psycopg_pool import AsyncConnectionPool
from tenacity import AsyncRetrying, retry_if_exception_type, stop_after_delay, wait_exponential_jitter

log = logging.getLogger("cronbox.db")
T = TypeVar("T")

set_json_dumps(orjson.dumps)
set_json_loads(orjson.loads)

CONNECT_KWARGS = {"autocommit": True, "prepare_threshold": None}


class DatabaseError(RuntimeError):
    """A database problem explained in one line (for the CLI)."""


def explain(exc: BaseException) -> str:
    """One line for an operator: what went wrong talking to PostgreSQL."""
    if isinstance(exc, psycopg.errors.UndefinedFunction | psycopg.errors.InvalidSchemaName) or (
        isinstance(exc, psycopg.errors.UndefinedTable) and "cronbox" in str(exc)
    ):
        return "the cronbox schema is missing or out of date: run `cronbox migrate`"
    if isinstance(exc, psycopg.OperationalError):
        text = str(exc).strip().splitlines()
        msg = text[-1] if text else exc.__class__.__name__
        for line in text:
            if "password authentication failed" in line or "does not exist" in line:
                msg = line
                break
        return f"cannot connect to PostgreSQL: {msg.strip()}"
    return f"{exc.__class__.__name__}: {str(exc).strip().splitlines()[0] if str(exc).strip() else ''}"


def connect(dsn: str, **kwargs: object) -> psycopg.Connection:
    return psycopg.connect(dsn, **{**CONNECT_KWARGS, **kwargs})


async def aconnect(dsn: str, **kwargs: object) -> psycopg.AsyncConnection:
    return await psycopg.AsyncConnection.connect(dsn, **{**CONNECT_KWARGS, **kwargs})


async def open_pool(dsn: str, *, min_size: int = 1, max_size: int = 4, name: str = "cronbox") -> AsyncConnectionPool:
    """Open the process's one pool explicitly; connections are checked before use."""
    pool = AsyncConnectionPool(
        dsn,
        min_size=min_size,
        max_size=max_size,
        kwargs=dict(CONNECT_KWARGS),
        check=AsyncConnectionPool.check_connection,
        name=name,
        open=False,
        reconnect_timeout=3600,
    )
    await pool.open(wait=True, timeout=30)
    return pool


def _count_db_error() -> None:
    from cronbox import metrics  # lazy: the CLI's one-shot commands do not need it

    metrics.observe_db_error()


async def retrying(op: Callable[[], Awaitable[T]], *, budget: float, what: str,
                   stop: asyncio.Event | None = None) -> T:
    """Run a whole transaction again on connection errors, bounded by time (they carry no
    SQLSTATE). With `stop`, give up (re-raising the last error) once it is set: a process
    asked to shut down while the database is away must not retry for the whole budget."""
    give_up = stop_after_delay(budget)
    if stop is not None:
        give_up = give_up | (lambda _state: stop.is_set())
    async for attempt in AsyncRetrying(
        retry=retry_if_exception_type((psycopg.OperationalError, psycopg.InterfaceError)),
        wait=wait_exponential_jitter(multiplier=0.1, max=5),
        stop=give_up,
        reraise=True,
        before_sleep=lambda rs: (_count_db_error(), log.warning(
            "%s failed, retrying", what, extra={"fields": {"attempt": rs.attempt_number, "error": explain(rs.outcome.exception())}}
        )),
    ):
        with attempt:
            return await op()
    raise AssertionError("unreachable")
