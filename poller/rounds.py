"""What both poller loops do around one round (a dispatch tick, a saturation pass): retry it
while the database is away, stop it on SIGTERM, and survive its failure."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import TypeVar

import psycopg

from cronbox import db
from cronbox.config import Config
from cronbox.log import event
from cronbox.proc import Waker
from poller.health import LoopHealth
from poller.quarantine import describe

log = logging.getLogger("cronbox.poller")
T = TypeVar("T")


async def unless_stopped(op: Callable[[], Awaitable[T]], what: str, cfg: Config, waker: Waker) -> T | None:
    """One tick or pass, retried while the database is away. On SIGTERM an in-flight one gets
    the shutdown timeout to finish; one still waiting for the database then is cancelled (its
    transaction rolls back: nothing half-done). None = stop now."""
    work = asyncio.ensure_future(db.retrying(op, budget=3600, what=what, stop=waker.stop))
    stop = asyncio.ensure_future(waker.stop.wait())
    try:
        await asyncio.wait({work, stop}, return_when=asyncio.FIRST_COMPLETED)
        if not work.done():
            await asyncio.wait({work}, timeout=cfg.shutdown_timeout.total_seconds())
    finally:
        stop.cancel()
        if not work.done():
            work.cancel()
    try:
        return await work
    except asyncio.CancelledError:
        if waker.stop.is_set():
            return None
        raise
    except (psycopg.OperationalError, psycopg.InterfaceError):
        if waker.stop.is_set():  # asked to stop while the database is away: just stop
            return None
        raise


async def failed(health: LoopHealth, exc: BaseException, waker: Waker, cfg: Config) -> None:
    """A round failed with something other than a lost connection (retried inside): log it,
    count it for /healthz, back off (up to 5 s) and go on: a loop never dies of one error."""
    health.failed(describe(exc))
    event(log, f"{health.name} failed", level=logging.ERROR, error=describe(exc), failures=health.failures)
    await waker.sleep(min(5.0, max(cfg.poll_interval.total_seconds(), 0.1) * 2 ** min(health.failures, 6)))
