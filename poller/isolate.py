"""One bad job never stops the others: telling a job's fault from the database's, reading rows
whose values Python cannot hold, and setting the culprit of a failed batch aside.

A batch (a saturation pass, a dispatch call) that fails with a *job fault* (bad data: a value
out of range, an overflow, a constraint, a raised exception) is retried without the job at
fault: saturation stores job by job and quarantines the ones that still fail; dispatch goes
one run at a time and quarantines the job of the fire that fails. Anything else (connection
loss, a statement timeout, a lock or serialization conflict) is the database's and is retried
as before. Quarantine is `cronbox.quarantine_job`: the job is paused with the error as the
reason, logged in the change log, announced as a `job_quarantined` notification, counted in
`cronbox_jobs_quarantined_total` and written to the log here.
"""

from __future__ import annotations

import logging
from typing import Any

import psycopg
from psycopg.types.datetime import IntervalLoader, TimestamptzLoader

from cronbox import metrics
from cronbox.log import event

log = logging.getLogger("cronbox.poller")

# SQLSTATE classes that mean "this row's data", not "the database right now": data exception,
# integrity violation, routine exceptions, syntax/undefined (a value used as SQL), plpgsql
# RAISE, program limit exceeded.
_JOB_FAULT_CLASSES = {"22", "23", "2F", "38", "39", "42", "P0", "54"}
MAX_QUARANTINES_PER_TICK = 20


def job_fault(exc: BaseException) -> bool:
    """True when the error comes from the data of the rows in the batch (by SQLSTATE: psycopg
    files some, such as 54 program limit exceeded, under OperationalError)."""
    if not isinstance(exc, psycopg.Error):
        return False
    state = getattr(exc, "sqlstate", None)
    if state:
        return state[:2] in _JOB_FAULT_CLASSES
    # No SQLSTATE: a lost connection, or a value Python cannot load (a loader's DataError).
    return isinstance(exc, psycopg.DataError)


def describe(exc: BaseException) -> str:
    """One line, bounded: what the change log and the notification say."""
    diag = getattr(exc, "diag", None)
    primary = diag.message_primary if diag is not None else None  # without CONTEXT noise
    text = " ".join((primary or str(exc)).split()) or exc.__class__.__name__
    state = getattr(exc, "sqlstate", None)
    return (f"{text} (SQLSTATE {state})" if state else text)[:400]


class OutOfRange:
    """A timestamp or interval PostgreSQL holds but Python cannot (BC, after 9999, infinity)."""

    def __init__(self, text: str) -> None:
        self.text = text

    def __repr__(self) -> str:
        return f"OutOfRange({self.text!r})"


class _LenientTimestamptz(TimestamptzLoader):
    def load(self, data: Any) -> Any:
        try:
            return super().load(data)
        except psycopg.DataError:
            return OutOfRange(bytes(data).decode(errors="replace"))


class _LenientInterval(IntervalLoader):
    def load(self, data: Any) -> Any:
        try:
            return super().load(data)
        except (psycopg.DataError, OverflowError):
            return OutOfRange(bytes(data).decode(errors="replace"))


def lenient(cursor: psycopg.AsyncCursor[Any]) -> psycopg.AsyncCursor[Any]:
    """Load timestamps and intervals Python cannot hold as OutOfRange instead of failing the
    whole fetch: one job's `at => '4713-01-01 BC'` must not hide the other jobs of its batch."""
    cursor.adapters.register_loader("timestamptz", _LenientTimestamptz)
    cursor.adapters.register_loader("interval", _LenientInterval)
    return cursor


def announce(job_id: int, why: str, stage: str) -> None:
    """The log line and the metric of a quarantine (the change log and notification are SQL's)."""
    metrics.observe_quarantine(stage)
    event(log, "job quarantined", level=logging.ERROR, job_id=job_id, stage=stage, error=why,
          hint="fix the schedule, then SELECT cronbox.resume(name)")


async def quarantine(conn: psycopg.AsyncConnection[Any], job_id: int, why: str, stage: str) -> bool:
    """Quarantine one job in its own transaction (the failed batch's is gone)."""
    cur = await conn.execute("SELECT cronbox.quarantine_job(%s, %s)", (job_id, why))
    row = await cur.fetchone()
    done = bool(row and row[0])
    if done:
        announce(job_id, why, stage)
    return done


async def first_ready_job(conn: psycopg.AsyncConnection[Any]) -> int | None:
    """The job of the fire `cronbox.dispatch` takes first: ready, due, lowest priority, oldest."""
    cur = await conn.execute(
        "SELECT f.job_id FROM cronbox.job_future f "
        "WHERE f.hold IS NULL AND f.due_at <= now() ORDER BY f.priority, f.due_at LIMIT 1")
    row = await cur.fetchone()
    return row[0] if row else None


async def dispatch_one_by_one(conn: psycopg.AsyncConnection[Any], limit: int, first: BaseException) -> tuple[int, int]:
    """After a failed dispatch batch: dispatch one fire at a time, quarantining the job of each
    fire that fails, until `limit` fires are decided or none is due. Returns (dispatched,
    quarantined). Raises when the failure is not a job's (or keeps recurring past the cap)."""
    dispatched = quarantined = decided = 0
    error: BaseException = first
    while decided < limit:
        try:
            cur = await conn.execute("SELECT dispatched, skipped + failed + held FROM cronbox.dispatch(1)")
            row = await cur.fetchone()
            assert row is not None
            if row[0] + row[1] == 0:
                break
            dispatched += row[0]
            decided += row[0] + row[1]
            continue
        except psycopg.Error as exc:
            if not job_fault(exc):
                raise
            error = exc
        culprit = await first_ready_job(conn)
        if culprit is None or quarantined >= MAX_QUARANTINES_PER_TICK:
            raise error
        if await quarantine(conn, culprit, f"dispatch failed: {describe(error)}", "dispatch"):
            quarantined += 1
        else:  # already paused (its fires are held now) or gone: nothing more to set aside
            raise error
    return dispatched, quarantined
