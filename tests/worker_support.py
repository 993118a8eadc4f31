"""Helpers for the worker-kit tests: runs put into the outbox through the real dispatch, and
the kit started as a real `cronbox worker` process."""

from __future__ import annotations

from pathlib import Path

import orjson
import psycopg

from cronbox import db
from cronbox.pgcluster import free_port

from .procs import Proc, wait_until

APP = "tests.worker_apps:worker"


def enqueue(conn: psycopg.Connection, n: int, queue: str, *, payload: dict | None = None,
            timeout: str = "5 minutes", max_attempts: int = 1, retry_delay: str = "1 hour",
            job: str | None = None) -> list[int]:
    """n runs of a job of `queue` (default name kit-<queue>) dispatched into the outbox by
    cronbox.dispatch; their run ids."""
    job = job or f"kit-{queue}"
    row = conn.execute("SELECT job_id FROM cronbox.job WHERE name = %s", (job,)).fetchone()
    if row is None:
        row = conn.execute(
            "SELECT cronbox.schedule(%s, at => now() + interval '1 day', queue => %s, overlap => 'allow', "
            "timeout => %s::interval, max_attempts => %s, retry_delay => %s::interval, "
            "retry_max_delay => greatest(%s::interval, interval '1 hour'))",
            (job, queue, timeout, max_attempts, retry_delay, retry_delay)).fetchone()
    job_id = row[0]
    before = conn.execute("SELECT coalesce(max(run_id), 0) FROM cronbox.runs WHERE job_id = %s", (job_id,)).fetchone()[0]
    done = conn.execute("SELECT count(*) FROM cronbox.runs WHERE job_id = %s", (job_id,)).fetchone()[0]
    conn.execute(
        "INSERT INTO cronbox.job_future (job_id, fire_at, due_at, origin, payload, bucket) "
        "SELECT %s, timestamptz '2020-01-01 00:00Z' + (%s + g) * interval '1 second', "
        "now() - interval '1 second', 'manual', %s, (SELECT j.bucket FROM cronbox.job j WHERE j.job_id = %s)"
        " FROM generate_series(1, %s) g",
        (job_id, done, db.Jsonb(payload or {}), job_id, n))
    def dispatched() -> list[int]:
        # A poller running beside the test may hold the futures (SKIP LOCKED: this dispatch
        # passes them over) and commit its runs a moment later: dispatch again until all are in.
        conn.execute("SELECT cronbox.dispatch(%s)", (n + 1000,))
        rows = conn.execute("SELECT run_id FROM cronbox.runs WHERE job_id = %s AND run_id > %s ORDER BY run_id",
                            (job_id, before)).fetchall()
        assert len(rows) <= n, f"dispatched {len(rows)} of {n}"
        return [r[0] for r in rows] if len(rows) == n else []

    return wait_until(dispatched, timeout=30, what=f"{n} runs of {job} dispatched")


def runs(conn: psycopg.Connection, ids: list[int]) -> list[tuple]:
    """(run_id, state, attempt, result, error, worker) of each run, in run_id order."""
    return conn.execute("SELECT run_id, state, attempt, result, error, worker FROM cronbox.runs "
                        "WHERE run_id = ANY(%s) ORDER BY run_id", (ids,)).fetchall()


def states(conn: psycopg.Connection, ids: list[int]) -> list[str]:
    return [r[1] for r in runs(conn, ids)]


def wait_states(conn: psycopg.Connection, ids: list[int], wanted: set[str], timeout: float = 30,
                proc: Proc | None = None) -> list[tuple]:
    def check():
        if proc is not None and proc.popen.poll() is not None:
            raise AssertionError(f"worker exited with {proc.popen.returncode}:\n{proc.output}")
        rows = runs(conn, ids)
        return rows if all(r[1] in wanted for r in rows) and len(rows) == len(ids) else False
    try:
        return wait_until(check, timeout, f"runs in {wanted}")
    except AssertionError:
        if proc is not None:
            print(proc.output)
        print("runs:", runs(conn, ids))
        raise


def kit(dsn: str, tmp: Path, *, http: bool = False, port: int | None = None,
        **env: str) -> tuple[Proc, int | None, Path]:
    """`cronbox worker tests.worker_apps:worker` (push mode on a free port with http=True)."""
    log = tmp / f"executions-{free_port()}.log"
    log.touch()
    port = (port or free_port()) if http else None
    args = APP + (f" --port {port}" if http else "")
    proc = Proc("worker", dsn, tmp, _args=args, WORKER_TEST_LOG=str(log), **env)
    return proc, port, log


def executions(log: Path, what: str = "start") -> list[str]:
    return [line.split(" ", 1)[1] for line in log.read_text().splitlines() if line.startswith(what + " ")]


def autocommit(dsn: str) -> psycopg.Connection:
    return psycopg.connect(dsn, autocommit=True, prepare_threshold=None)


def loads(text: bytes) -> object:
    return orjson.loads(text)
