"""What the poller and relay processes share: signals, the stop event, LISTEN wake-ups, sleeps,
supervised side tasks.

The loop shape: one transaction per tick; go again at once while batches come back full;
otherwise sleep until the next due time, a NOTIFY, or a jittered poll interval, whichever
comes first. The toolkit:

- `Waker.sleep(seconds, also=...)`: until the time passes, a NOTIFY (`wake`), any of `also`,
  or stop; `pause(stop, seconds)`: until the time passes or stop (True if stopped);
  `ticks(stop, every)`: `async for _ in ticks(...)` runs a body every `every` seconds until stop.
- `Supervisor`: side tasks (listener, registry, metrics, checks) and child tasks (a relay's
  sends) whose crash stops the process with the error logged, never a task whose exception
  vanishes. `async with Supervisor(waker, "relay") as side: side.spawn(coro, name=...)`.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import os
import random
import signal
import socket
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Iterable
from typing import Any

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

    async def sleep(self, seconds: float, *, jitter: float = 0.0, also: Iterable[asyncio.Event] = ()) -> None:
        """Until `seconds` (jittered by +-jitter) pass, a wake-up, stop, or any event in `also`
        is set. Clears `wake` (not the `also` events: their owner does)."""
        if self.stop.is_set():
            return
        seconds = max(0.0, seconds * (1 + random.uniform(-jitter, jitter)))
        waits = [asyncio.ensure_future(e.wait()) for e in (self.stop, self.wake, *also)]
        try:
            await asyncio.wait(waits, timeout=seconds, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for w in waits:
                w.cancel()
        self.wake.clear()


async def pause(stop: asyncio.Event, seconds: float) -> bool:
    """Sleep up to `seconds`; returns True as soon as `stop` is set (False when time ran out)."""
    if stop.is_set():
        return True
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(stop.wait(), max(0.0, seconds))
    return stop.is_set()


async def ticks(stop: asyncio.Event, every: float, *, first: bool = False) -> AsyncIterator[None]:
    """`async for _ in ticks(stop, 30):` a body every `every` seconds (the first one at once
    when `first`), until stop; stop interrupts the wait between ticks."""
    if first and not stop.is_set():
        yield None
    while not await pause(stop, every):
        yield None


class Supervisor:
    """Supervised tasks for one process: an `asyncio.TaskGroup` whose tasks, when one raises,
    log the error with the task's name and set the stop event, so the process shuts down
    cleanly (finishing in-flight work) instead of running on half alive; the TaskGroup then
    cancels the other tasks and raises the error when the `async with` block ends.

    `spawn()` is for side tasks that run as long as the process; `spawn(..., child=True)` for
    short work the process starts as it goes (a relay's sends): same crash handling, and the
    task is tracked in `children` until done."""

    def __init__(self, waker: Waker, process: str):
        self.waker, self.process = waker, process
        self.children: set[asyncio.Task[Any]] = set()
        self._group = asyncio.TaskGroup()

    async def __aenter__(self) -> Supervisor:
        await self._group.__aenter__()
        return self

    async def __aexit__(self, *exc: Any) -> bool | None:
        return await self._group.__aexit__(*exc)

    def spawn(self, coro: Coroutine[Any, Any, Any], *, name: str, child: bool = False) -> asyncio.Task[Any]:
        task = self._group.create_task(self._guard(coro, name), name=name)
        if child:
            self.children.add(task)
            task.add_done_callback(self.children.discard)
        return task

    async def _guard(self, coro: Coroutine[Any, Any, Any], name: str) -> Any:
        try:
            return await coro
        except asyncio.CancelledError:
            raise
        except BaseException as exc:
            event(log, "task crashed, stopping the process", level=logging.CRITICAL, process=self.process,
                  task=name, error=f"{exc.__class__.__name__}: {exc}")
            self.waker.stop.set()
            raise


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
            await waker.sleep(delay, jitter=0.2)
            delay = min(delay * 2, 1.0)  # back within ~1 s of the server: the reconnect also wakes the loop


# The cyclic garbage collector of a long-running process that handles a batch of rows at a time:
# the youngest generation collected every 50,000 allocations instead of 700. A relay's claim of
# 1,000 rows allocates tens of thousands of objects, nearly all freed by reference counting, and
# with the default a fifth of the relay's busy time went to collections that found nothing
# (py-spy, a push drain); the rows of a claim built ~1.0 µs a row faster (2.5 -> 1.5, timed alone).
GC_THRESHOLD = (50_000, 10, 10)


def steady_gc() -> None:
    """Freeze what start-up made (modules, classes, settings: never garbage, and no longer walked
    by a full collection) and collect the youngest generation every GC_THRESHOLD[0] allocations."""
    gc.freeze()
    gc.set_threshold(*GC_THRESHOLD)


async def run_until_stopped(name: str, body: Callable[[Waker], Awaitable[None]]) -> int:
    """Run a process body with signal handling and the collector of a long-running process
    (steady_gc); returns the exit code."""
    steady_gc()
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
