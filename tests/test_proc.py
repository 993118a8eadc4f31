"""cronbox/proc.py: the process toolkit (sleeps that stop interrupts, supervised tasks)."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time

import pytest

from cronbox.proc import GC_THRESHOLD, Supervisor, Waker, pause, ticks


async def test_pause_returns_at_once_when_stopped_and_false_when_time_ran_out():
    stop = asyncio.Event()
    assert await pause(stop, 0.01) is False
    asyncio.get_running_loop().call_soon(stop.set)
    t0 = time.monotonic()
    assert await pause(stop, 30) is True
    assert time.monotonic() - t0 < 5


async def test_ticks_run_the_body_until_stopped():
    stop = asyncio.Event()
    seen = 0
    async for _ in ticks(stop, 0.001, first=True):
        seen += 1
        if seen == 3:
            stop.set()
    assert seen == 3


async def test_sleep_wakes_on_an_extra_event():
    waker, extra = Waker(), asyncio.Event()
    asyncio.get_running_loop().call_soon(extra.set)
    t0 = time.monotonic()
    await waker.sleep(30, also=(extra,))
    assert time.monotonic() - t0 < 5


async def test_a_crashing_side_task_stops_the_process_and_its_error_surfaces():
    waker = Waker()
    finished_cleanly = asyncio.Event()

    async def crash() -> None:
        raise RuntimeError("side task broke")

    async def steady() -> None:
        await waker.stop.wait()  # a well-behaved task sees stop and ends
        finished_cleanly.set()

    with pytest.raises(ExceptionGroup) as group:
        async with Supervisor(waker, "test") as tasks:
            tasks.spawn(steady(), name="steady")
            tasks.spawn(crash(), name="crash")
            await waker.stop.wait()  # the main loop: ends because the crash set stop
    assert waker.stop.is_set()
    assert group.group_contains(RuntimeError, match="side task broke")


async def test_child_tasks_are_tracked_until_done():
    waker = Waker()
    async with Supervisor(waker, "test") as tasks:
        gate = asyncio.Event()

        async def child() -> None:
            await gate.wait()

        task = tasks.spawn(child(), name="child", child=True)
        assert tasks.children == {task}
        gate.set()
        await task
        assert tasks.children == set()


def test_a_process_runs_with_its_start_up_objects_frozen_and_young_collections_spaced():
    # in a process of its own: the collector's settings are the interpreter's, not this test's
    script = ("import asyncio, gc\n"
              "from cronbox.proc import run_until_stopped\n"
              "async def body(waker):\n"
              "    print(gc.get_threshold()[0], gc.get_freeze_count() > 0)\n"
              "asyncio.run(run_until_stopped('test', body))\n")
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True, timeout=60).stdout
    assert out.split() == [str(GC_THRESHOLD[0]), "True"]
