"""Helpers for the runs tests: jobs and futures at chosen times, dispatch and reports at a chosen time.

Time is driven with p_now of the internal cronbox.*_at functions from T0 (far from the real clock), so nothing depends on when the
suite runs. Futures are inserted directly: these tests are about what happens once a fire
is due, not about saturation.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Any

import psycopg

from bench.database import ADD_JOB_ROWS  # noqa: F401 (re-exported for the tests)

T0 = datetime(2031, 3, 1, 12, 0, tzinfo=timezone.utc)


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def job(conn: psycopg.Connection, name: str, **opts: Any) -> int:
    """cronbox.schedule() a job (every hour by default) created at T0 - 1 day."""
    opts.setdefault("every", timedelta(hours=1))
    args = ", ".join(f"{k} => %({k})s" for k in opts)
    return conn.execute(
        f"SELECT cronbox.schedule_at(%(name)s, {args}, p_now => %(now)s)",
        {"name": name, "now": T0 - timedelta(days=1), **opts}).fetchone()[0]


def future(conn: psycopg.Connection, name: str, fire: float, *, due: float | None = None,
           priority: int | None = None, origin: str = "schedule") -> int:
    """A fire of job `name` at at(fire), due at at(due) (default: the fire time)."""
    return conn.execute(
        "INSERT INTO cronbox.job_future (job_id, fire_at, due_at, priority, origin, queue, bucket) "
        "SELECT j.job_id, %s, %s, coalesce(%s, j.priority), %s, j.queue, j.bucket FROM cronbox.job j WHERE j.name = %s "
        "RETURNING future_id",
        (at(fire), at(fire if due is None else due), priority, origin, name)).fetchone()[0]


def dispatch(conn: psycopg.Connection, now: float, limit: int = 1000) -> dict[str, Any]:
    cur = conn.execute("SELECT * FROM cronbox.dispatch_at(%s, p_now => %s)", (limit, at(now)))
    cols = [d.name for d in cur.description]
    return dict(zip(cols, cur.fetchone()))


def runs(conn: psycopg.Connection, name: str | None = None) -> list[dict[str, Any]]:
    cur = conn.execute(
        "SELECT * FROM cronbox.runs WHERE run_id IS NOT NULL AND (%(name)s::text IS NULL OR job = %(name)s) "
        "ORDER BY run_id", {"name": name})  # runs, not the fires waiting to be dispatched
    cols = [d.name for d in cur.description]
    return [dict(zip(cols, r)) for r in cur.fetchall()]


def states(conn: psycopg.Connection, name: str) -> list[str]:
    return [r["state"] for r in runs(conn, name)]


def active(conn: psycopg.Connection, name: str) -> list[int]:
    return [r["run_id"] for r in runs(conn, name) if r["state"] in ("dispatched", "delivered", "running")]


def fold(conn: psycopg.Connection) -> None:
    """The poller's fold of job statistics, now (a job whose statistics no policy reads has them
    written by the fold, every second: docs/architecture.md, "Statistics off the hot path")."""
    conn.execute("SELECT cronbox.fold_job_stats(1000000)")


def jobrow(conn: psycopg.Connection, name: str) -> dict[str, Any]:
    # the definition and its run statistics (cronbox.job_stat, migration 0122), folded first
    fold(conn)
    cur = conn.execute("SELECT j.*, s.*, f.frontier, f.next_fire, f.fires_made FROM cronbox.job j "
                       "JOIN cronbox.job_stat s USING (job_id) JOIN cronbox.job_fire f USING (job_id) "
                       "WHERE j.name = %s", (name,))
    cols = [d.name for d in cur.description]
    return dict(zip(cols, cur.fetchone()))


def futures(conn: psycopg.Connection, name: str) -> list[dict[str, Any]]:
    cur = conn.execute(
        "SELECT f.* FROM cronbox.job_future f JOIN cronbox.job j USING (bucket, job_id) "
        "WHERE j.name = %s ORDER BY f.due_at, f.future_id", (name,))
    cols = [d.name for d in cur.description]
    return [dict(zip(cols, r)) for r in cur.fetchall()]


def complete(conn: psycopg.Connection, run_id: int, now: float, result: Any = None) -> str:
    from psycopg.types.json import Jsonb
    return conn.execute("SELECT cronbox.complete_run_at(%s, %s, %s)",
                        (run_id, Jsonb(result) if result is not None else None, at(now))).fetchone()[0]


def fail(conn: psycopg.Connection, run_id: int, now: float, error: str = "boom", retryable: bool = True) -> str:
    return conn.execute("SELECT cronbox.fail_run_at(%s, %s, %s, %s)",
                        (run_id, error, retryable, at(now))).fetchone()[0]


def notifications(conn: psycopg.Connection, event: str | None = None) -> list[dict[str, Any]]:
    rows = conn.execute(
        "SELECT message FROM cronbox.outbox WHERE kind = 'notification' "
        "AND queue = 'cronbox.notifications' ORDER BY outbox_id").fetchall()
    return [r[0] for r in rows if event is None or r[0]["event"] == event]


def end_quietly(conn: psycopg.Connection, run_ids: list[int], state: str, finished_at: Any = None) -> None:
    """End runs in flight the way no function does (no bookkeeping, no wake-up): the run's
    outbox row moved into history in its final state, for tests of the backstops that catch up
    with such an end."""
    conn.execute(
        "WITH gone AS (DELETE FROM cronbox.outbox WHERE outbox_id = ANY(%(ids)s) AND kind = 'run' RETURNING *) "
        "INSERT INTO cronbox.run (run_id, job_id, bucket, job_name, queue, fire_at, due_at, state, attempt, origin, "
        "retry_of, payload, priority, dispatched_at, delivered_at, started_at, finished_at, worker, "
        "cancel_requested, needs, trouble) "
        "SELECT outbox_id, job_id, bucket, job_name, queue, fire_at, due_at, %(state)s, attempt, origin, retry_of, "
        "payload, coalesce(priority, 0), dispatched_at, delivered_at, started_at, coalesce(%(at)s, now()), worker, "
        "cancel_requested, needs, cronbox.run_trouble(%(state)s) FROM gone",
        {"ids": list(run_ids), "state": state, "at": finished_at})
