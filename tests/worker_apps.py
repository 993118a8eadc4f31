"""Worker apps the worker-kit tests run as real processes (`cronbox worker tests.worker_apps:worker`).

Every handler appends "<queue> <idempotency_key>" to the file named by WORKER_TEST_LOG when it
starts, so a test can count executions; nothing here sleeps as synchronisation: handlers wait
on run.cancelled or for a time given in the payload.
"""

from __future__ import annotations

import asyncio
import os
import time

from cronbox.worker import Fail, Retry, Worker

worker = Worker()


def record(run, what: str = "start") -> None:
    path = os.environ.get("WORKER_TEST_LOG")
    if path:
        with open(path, "a") as f:
            f.write(f"{what} {run.queue} {run.idempotency_key}\n")


@worker.handler("ok")
async def ok(run):
    record(run)
    return {"echo": run.payload, "key": run.idempotency_key, "attempt": run.attempt,
            "has_deadline": run.deadline is not None}


@worker.handler("boom")
def boom(run):  # a sync handler (thread pool)
    record(run)
    raise RuntimeError("kaput " + "x" * 10_000)


@worker.handler("mixed")
async def mixed(run):
    """The queue's default: every job of queue mixed without a handler of its own."""
    record(run)
    return {"by": "default"}


@worker.handler("mixed", job="special", retry=Retry(tries=3, backoff=0.05, jitter=0, on=ConnectionError))
def special(run):
    """Job 'special' only; fails its first two calls, which its retry policy absorbs."""
    record(run, f"try{run.tries}")
    if run.tries < 3:
        raise ConnectionError("flaky upstream")
    return {"by": "special", "tries": run.tries}


@worker.handler("fatal")
async def fatal(run):
    record(run)
    raise Fail("bad input", retryable=False)


@worker.handler("long", enforce_deadline=False)
async def long(run):
    """Runs for payload.seconds, past its lease: only heartbeats keep the run alive."""
    record(run)
    await asyncio.sleep(float(run.payload.get("seconds", 1)))
    return {"slept": run.payload.get("seconds")}


@worker.handler("sleep")
async def sleep(run):
    record(run)
    await asyncio.sleep(float(run.payload.get("seconds", 0)))
    record(run, "done")
    return {"slept": run.payload.get("seconds")}


@worker.handler("stubborn")
async def stubborn(run):
    """Ignores its deadline: the kit must cancel it."""
    record(run)
    await asyncio.sleep(3600)


@worker.handler("cooperative")
def cooperative(run):
    """A sync handler that waits for cancellation and says when it saw it."""
    record(run)
    seen = run.cancelled.wait(float(run.payload.get("seconds", 60)))
    record(run, f"cancelled={seen}")
    return {"cancelled": seen}


@worker.handler("busy")
def busy(run):
    """CPU-free blocking work in a thread: must not block the loop (heartbeats go on)."""
    record(run)
    time.sleep(float(run.payload.get("seconds", 0)))
    return "done"


@worker.handler("nul")
async def nul(run):
    """A result PostgreSQL refuses (jsonb has no \\u0000)."""
    record(run)
    return {"text": "a\x00b"}
