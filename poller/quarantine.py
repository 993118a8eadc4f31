"""Quarantine: a job the poller cannot process is set aside so every other job keeps firing.

`cronbox.quarantine_job` (SQL) pauses the job with reason 'quarantined: <error>', drops its
scheduled futures, holds its other futures until resume, writes the change-log action
'quarantined' and a schedule_paused notification. Here: the call (in a savepoint, so a
failure to quarantine never takes the caller's batch down), a log line and the metric
cronbox_jobs_quarantined_total{stage}.

`bisect()` finds the members of a batch that make it fail: it runs the batch, and on a
non-connection error splits it in halves (each in its own savepoint) down to single members.
A batch of n with k bad members costs O(k log n) extra statements; a healthy batch costs
one savepoint.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import TypeVar

import psycopg
from prometheus_client import Counter

from cronbox import db
from cronbox.log import event
from poller import store

log = logging.getLogger("cronbox.poller")
T = TypeVar("T")
R = TypeVar("R")

QUARANTINED = Counter("cronbox_jobs_quarantined",
                      "Jobs the poller quarantined (paused because it could not process them), by stage",
                      ["stage"])
ERROR_MAX = 1000  # characters of an error kept in the reason (the SQL function cuts there too)

# A read-only server (a demoted primary) is no job's fault: retried like a lost connection
CONNECTION_ERRORS = (psycopg.OperationalError, psycopg.InterfaceError, psycopg.errors.ReadOnlySqlTransaction)


def describe(exc: BaseException) -> str:
    """One line naming the error: SQLSTATE and message for database errors."""
    text = " ".join(str(exc).split()) or exc.__class__.__name__
    sqlstate = getattr(exc, "sqlstate", None)
    prefix = f"{exc.__class__.__name__}" + (f" ({sqlstate})" if sqlstate else "")
    return f"{prefix}: {text}"[:ERROR_MAX]


async def quarantine(conn: psycopg.AsyncConnection, job_id: int, error: str, stage: str,
                     bucket: int | None = None) -> bool:
    """Quarantine one job inside the caller's transaction (its own savepoint), in `bucket` (the
    job's, as claimed; None: looked up). True if it was paused now; False if it was gone,
    already paused, or quarantining it failed (logged)."""
    try:
        async with conn.transaction():
            done = await store.quarantine_job(conn, job_id, error[:ERROR_MAX], bucket)
    except CONNECTION_ERRORS:
        raise
    except psycopg.Error as exc:
        event(log, "quarantine failed", level=logging.ERROR, job_id=job_id, stage=stage,
              error=describe(exc), cause=error)
        return False
    if done:
        QUARANTINED.labels(stage).inc()
        event(log, "job quarantined", level=logging.ERROR, job_id=job_id, stage=stage, error=error)
    return done


class NotTheJobs(Exception):
    """The batch fails whatever jobs it holds (the statement itself is broken, the schema is
    out of date...): nobody is quarantined, the loop reports the failure to /healthz."""


async def isolate(conn: psycopg.AsyncConnection, items: Sequence[T],
                  run: Callable[[Sequence[T]], Awaitable[R]], cause: BaseException
                  ) -> tuple[list[R], list[tuple[T, str]]]:
    """After `run(items)` failed with `cause`: first a control run with no item (a failure
    there is not the jobs' fault: raise NotTheJobs), then `bisect`. When every one of several
    items fails alone, that is not the jobs' fault either."""
    try:
        async with conn.transaction():
            await run([])
    except CONNECTION_ERRORS:
        raise
    except Exception as exc:
        if db.node_unreachable(exc):  # a Citus worker node lost: not the jobs' fault
            raise
        raise NotTheJobs(describe(exc)) from cause
    done, bad = await bisect(conn, items, run)
    if len(items) > 1 and len(bad) == len(items):
        raise NotTheJobs(f"every job of the batch fails alone: {bad[0][1]}") from cause
    return done, bad


async def bisect(conn: psycopg.AsyncConnection, items: Sequence[T],
                 run: Callable[[Sequence[T]], Awaitable[R]]) -> tuple[list[R], list[tuple[T, str]]]:
    """Run `run(items)` in a savepoint; on a database or Python error, split and retry each
    half, down to single items. Returns (results of the batches that succeeded, [(item,
    error)] for the items that fail alone). Connection errors propagate: the whole
    transaction is retried by the caller."""
    if not items:
        return [], []
    try:
        async with conn.transaction():
            return [await run(items)], []
    except CONNECTION_ERRORS:
        raise
    except Exception as exc:
        if db.node_unreachable(exc):  # a Citus worker node lost: not the items' fault
            raise
        if len(items) == 1:
            return [], [(items[0], describe(exc))]
    mid = len(items) // 2
    ok1, bad1 = await bisect(conn, items[:mid], run)
    ok2, bad2 = await bisect(conn, items[mid:], run)
    return ok1 + ok2, bad1 + bad2
