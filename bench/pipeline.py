"""The one-off-runs workload shared by the benches: load N jobs with one future each, watch
the pipeline drain, check the outcome (every run succeeded, exactly once), talk to the worker."""

from __future__ import annotations

import time
import urllib.request
from typing import Any

import orjson

from bench.common import Database, Fleet, log, wait_until
from bench.database import ADD_JOB_ROWS

def reset(database: Database) -> None:
    with database.connect() as conn:
        conn.execute("TRUNCATE cronbox.job_future, cronbox.outbox, cronbox.run, cronbox.job, cronbox.job_change, "
                     "cronbox.dead_letter, cronbox.job_after_edge CASCADE")


def load(database: Database, n: int, margin: float | None) -> float:
    """N one-off jobs with one future each, due `margin` seconds after the load (None: due now).
    Returns the due time as epoch seconds."""
    reset(database)
    with database.connect() as conn:
        conn.execute(
            "INSERT INTO cronbox.job (name, kind, at, finished_at, overlap) "
            "SELECT 'tp-' || i, 'at', now(), now(), 'allow' FROM generate_series(1, %s) AS i", (n,))
        conn.execute(ADD_JOB_ROWS)
        conn.execute("ANALYZE cronbox.job")
        due = conn.execute(
            "WITH ins AS (INSERT INTO cronbox.job_future (job_id, fire_at, due_at) "
            "  SELECT job_id, at, clock_timestamp() + make_interval(secs => %s) FROM cronbox.job RETURNING due_at) "
            "SELECT extract(epoch FROM min(due_at))::float8 FROM ins", (margin or 0.0,)).fetchone()[0]
        conn.execute("ANALYZE cronbox.job_future")
    if margin is not None and time.time() > due:
        log("warning: the load took longer than its margin; dispatch began before ANALYZE finished")
    return float(due)


def until_due(database: Database, fleet: Fleet, due: float) -> int:
    """Wait until 0.3 s before the due time; returns the runs already dispatched then (the poller
    dispatches a burst's runs ahead of their time, its lead grown for it: poller/lead.py), which
    the span, from the first run's dispatch time (the due time), leaves out."""
    while time.time() < due - 0.3:
        fleet.check_alive()
        time.sleep(0.05)
    with database.connect() as conn:
        return conn.execute("SELECT count(*) FROM cronbox.outbox").fetchone()[0]


def progress(database: Database) -> tuple[int, int, int]:
    """(futures left, outbox rows, unfinished runs)."""
    with database.connect() as conn:
        return conn.execute(
            "SELECT (SELECT count(*) FROM cronbox.job_future), (SELECT count(*) FROM cronbox.outbox), "
            "(SELECT count(*) FROM cronbox.runs WHERE state IN ('dispatched', 'delivered', 'running'))").fetchone()


def outcome(database: Database, n: int) -> dict[str, Any]:
    with database.connect() as conn:
        row = conn.execute(
            "SELECT count(*), count(*) FILTER (WHERE state = 'succeeded'), count(DISTINCT job_id), "
            "extract(epoch FROM max(finished_at) - min(dispatched_at))::float8, "
            "extract(epoch FROM min(dispatched_at))::float8, extract(epoch FROM max(finished_at))::float8 "
            "FROM cronbox.runs").fetchone()
    runs, succeeded, jobs, span, first, last = row
    ok = runs == n and succeeded == n and jobs == n
    return {"runs": runs, "succeeded": succeeded, "distinct_jobs": jobs, "complete_and_unique": ok,
            "span_s": round(span or 0.0, 3), "runs_per_s": round(n / span, 1) if span else None,
            "first_dispatch": first, "last_finish": last}


def wait_done(database: Database, n: int, fleet: Fleet | None, timeout: float) -> None:
    """Poll cheaply (the bench's own queries must not load the server it measures): futures
    and outbox empty, then no unfinished run. Every future was loaded before, so that is all."""
    def done() -> bool:
        if fleet is not None:
            fleet.check_alive()
        with database.connect() as conn:
            busy = conn.execute(
                "SELECT EXISTS (SELECT 1 FROM cronbox.job_future) OR EXISTS (SELECT 1 FROM cronbox.outbox)").fetchone()[0]
            if busy:
                return False
            return not conn.execute(
                "SELECT EXISTS (SELECT 1 FROM cronbox.runs WHERE state IN ('dispatched', 'delivered', 'running'))"
            ).fetchone()[0]

    wait_until(done, timeout, f"all {n} runs finished", interval=0.5)


def worker_stats(port: int) -> dict[str, Any]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/stats", timeout=5) as resp:
        return orjson.loads(resp.read())


def wait_worker(port: int, fleet: Fleet) -> None:
    def up() -> bool:
        fleet.check_alive()
        try:
            worker_stats(port)
            return True
        except OSError:
            return False
    # a dead worker fails at once (check_alive); a slow start on a loaded machine may take a while
    wait_until(up, 90, "the worker to listen")
