"""What the poller and relay processes share: signals, the stop event, LISTEN wake-ups, sleeps.

The loop shape: one transaction per tick; go again at once while batches come back full;
otherwise sleep until the next due time, a NOTIFY, or a jittered poll interval, whichever
comes first. Sleeps are `wait_for(event.wait(), timeout)` so shutdown interrupts them.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import random
import signal
import socket
from collections.abc import Awaitable, Callable, Iterable

import psycopg

from cronbox import db, metrics
from cronbox.log import event

log = logging.getLogger("cronbox.proc")


def identity(kind: str) -> str:
    """A name for this process: kind:host:pid (lease owner, processes view)."""
    return f"{kind}:{socket.gethostname()}:{os.getpid()}"


class Waker:
    """A stop event plus a wake-up event; `sleep()` returns early on either."""

    def __init__(self) -> None:
        self.stop = asyncio.Event()
        self.wake = asyncio.Event()

    async def sleep(self, seconds: float, *, jitter: float = 0.0) -> None:
        if self.stop.is_set():
            return
        seconds = max(0.0, seconds * (1 + random.uniform(-jitter, jitter)))
        stop_wait = asyncio.ensure_future(self.stop.wait())
        wake_wait = asyncio.ensure_future(self.wake.wait())
        try:
            await asyncio.wait({stop_wait, wake_wait}, timeout=seconds, return_when=asyncio.FIRST_COMPLETED)
        finally:
            stop_wait.cancel()
            wake_wait.cancel()
        self.wake.clear()


def install_signal_handlers(waker: Waker, main_task: asyncio.Task[object], name: str) -> None:
    """First SIGTERM/SIGINT: stop claiming and finish in-flight work. Second: cancel."""
    loop = asyncio.get_running_loop()

    def on_signal(signum: int) -> None:
        if waker.stop.is_set():
            event(log, "second signal, cancelling", level=logging.WARNING, process=name)
            main_task.cancel()
            return
        event(log, "stopping", process=name, signal=signal.Signals(signum).name)
        waker.stop.set()

    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, on_signal, sig)


async def listen(dsn: str, channels: Iterable[str], waker: Waker, on_connect: Callable[[], None] | None = None,
                 on_notify: Callable[[], None] | None = None) -> None:
    """Set `waker.wake` (and call `on_notify`) on every NOTIFY on the channels; reconnect with
    backoff forever.

    NOTIFY is only a hint: notifications sent while disconnected are gone, so every
    (re)connect also wakes the loop, which then polls.
    """
    delay = 0.1
    while not waker.stop.is_set():
        try:
            async with await db.aconnect(dsn) as conn:
                for ch in channels:
                    await conn.execute(f"LISTEN {ch}")
                delay = 0.1
                waker.wake.set()
                if on_connect:
                    on_connect()
                while not waker.stop.is_set():
                    async for _ in conn.notifies(timeout=1.0):
                        waker.wake.set()
                        if on_notify:
                            on_notify()
        except (psycopg.OperationalError, psycopg.InterfaceError) as exc:
            event(log, "listener disconnected", level=logging.WARNING, error=db.explain(exc))
            metrics.observe_reconnect()
            await waker.sleep(delay)
            delay = min(delay * 2, 5.0)


async def run_until_stopped(name: str, body: Callable[[Waker], Awaitable[None]]) -> int:
    """Run a process body with signal handling; returns the exit code."""
    waker = Waker()
    task = asyncio.current_task()
    assert task is not None
    install_signal_handlers(waker, task, name)
    try:
        await body(waker)
    except asyncio.CancelledError:
        return 1
    return 0


async def cancel_quietly(*tasks: asyncio.Task[object]) -> None:
    for t in tasks:
        t.cancel()
    for t in tasks:
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await t
