"""cronbox.client: the admin functions of cronbox as typed Python calls, on your connection.

    from datetime import timedelta
    from cronbox import client

    with psycopg.connect(dsn) as conn:              # one transaction with your own writes
        conn.execute("INSERT INTO invoices ...")
        job = client.schedule(conn, "remind-42", at=due, payload={"invoice": 42})
        client.pause(conn, "report", reason="holiday freeze")

    async with await psycopg.AsyncConnection.connect(dsn) as aconn:
        await client.aio.trigger(aconn, "report", payload={"kind": "adhoc"})

Every call is one `SELECT cronbox.<function>(name => value, ...)` on the connection you pass,
inside its current transaction (nothing is committed here; with autocommit each call commits
by itself). Keyword arguments mirror the SQL parameters (`from_`/`to` for backfill's "from" and
"to"); an argument left at None is not sent, so the SQL default applies. Durations are
`timedelta` (or PostgreSQL interval text such as "30 seconds"), times are timezone-aware
`datetime`. Results are plain values or frozen dataclasses; a refused call raises the subclass
of `CronboxError` for its SQLSTATE (docs/sql.md), with the parameter the message names in
`.param`. `tests/test_client.py` checks every call against the functions' signatures in
pg_proc, so an option added in SQL cannot be missing here.
"""

from __future__ import annotations

from cronbox.client.calls import (
    Backfill, Job, Triggered, add_dependency, backfill, cancel, create_calendar, delete_dead_letter, drop_calendar,
    grant_queue, next_fires, pause, pause_schedules, preview, redrive, remove_dependency, rerun, resume,
    resume_schedules, revoke_queue, schedule, set_pool, set_queue_limit, set_quota, trigger, unschedule)
from cronbox.client.errors import (
    CronboxError, InvalidValue, MissingValue, NotFound, NotPermitted, QuotaExceeded, UnknownParameter, WrongState)
from cronbox.client.reads import RunRecord, ScheduleRecord, get_run, get_schedule
from cronbox.client import aio

__all__ = [
    "aio", "Backfill", "CronboxError", "InvalidValue", "Job", "MissingValue", "NotFound", "NotPermitted",
    "QuotaExceeded", "RunRecord", "ScheduleRecord", "Triggered", "UnknownParameter", "WrongState", "add_dependency", "backfill",
    "cancel", "create_calendar", "drop_calendar", "get_run", "get_schedule", "next_fires", "pause", "preview",
    "redrive", "remove_dependency", "resume", "schedule", "set_pool", "set_queue_limit", "trigger", "unschedule",
    "pause_schedules", "resume_schedules", "grant_queue", "revoke_queue", "set_quota", "rerun", "delete_dead_letter",
]
