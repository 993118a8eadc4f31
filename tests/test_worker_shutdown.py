"""The worker kit's process behaviour: SIGTERM drains in-flight runs, SIGKILL loses nothing
(the lease rescues what was running)."""

from __future__ import annotations

from pathlib import Path

import pytest

from .procs import Proc, wait_until
from .worker_support import autocommit, enqueue, executions, kit, runs, wait_states

FINAL = {"succeeded", "failed", "cancelled", "lost"}


def test_sigterm_finishes_in_flight_runs_and_claims_no_more(fresh_dsn: str, tmp_path: Path) -> None:
    with autocommit(fresh_dsn) as conn:
        ids = enqueue(conn, 10, "sleep", payload={"seconds": 1.5})
        proc, _, log = kit(fresh_dsn, tmp_path, CRONBOX_WORKER_CONCURRENCY="4", CRONBOX_SHUTDOWN_TIMEOUT="20s")
        with proc:
            wait_until(lambda: len(executions(log)) == 4, 20, "four runs in flight")
            assert proc.terminate(timeout=30) == 0
        started = executions(log)
        assert len(started) == 4, "no claim after SIGTERM"
        assert sorted(executions(log, "done")) == sorted(started), "every in-flight run finished"
        by_key = {f"sleep {r[0]}:{r[2]}": r for r in runs(conn, ids)}
        assert all(by_key[k][1] == "succeeded" for k in started)
        rest = [r for k, r in by_key.items() if k not in started]
        assert len(rest) == 6 and all(r[1] == "dispatched" for r in rest), "the others wait in the outbox"
        assert conn.execute("SELECT count(*) FROM cronbox.outbox WHERE run_id = ANY(%s)", (ids,)).fetchone()[0] == 6


def test_sigterm_past_the_shutdown_timeout_hands_runs_back_for_retry(fresh_dsn: str, tmp_path: Path) -> None:
    with autocommit(fresh_dsn) as conn:
        ids = enqueue(conn, 2, "sleep", payload={"seconds": 600}, max_attempts=2)
        proc, _, log = kit(fresh_dsn, tmp_path, CRONBOX_SHUTDOWN_TIMEOUT="500ms", CRONBOX_WORKER_CANCEL_GRACE="100ms")
        with proc:
            wait_until(lambda: len(executions(log)) == 2, 20, "both runs in flight")
            assert proc.terminate(timeout=15) == 0
        rows = runs(conn, ids)
        assert [r[1] for r in rows] == ["failed", "failed"]
        assert all(r[4] == "worker shut down before the run finished" for r in rows)
        assert conn.execute("SELECT count(*) FROM cronbox.job_future WHERE retry_of = ANY(%s)",
                            (ids,)).fetchone()[0] == 2, "retryable: attempt 2 is scheduled at once"


@pytest.mark.slow
def test_sigkill_loses_nothing_the_lease_rescues_running_runs(fresh_dsn: str, tmp_path: Path) -> None:
    """Killed mid-batch: the finished runs stay finished, the running ones are declared lost
    when their lease (3 s) runs out and retried; a restarted worker completes the retries."""
    with autocommit(fresh_dsn) as conn, Proc("poller", fresh_dsn, tmp_path, CRONBOX_REAP_INTERVAL="200ms"):
        quick = enqueue(conn, 5, "ok")
        slow = enqueue(conn, 3, "sleep", payload={"seconds": 2}, timeout="3 seconds", max_attempts=2,
                       retry_delay="1 second")
        proc, _, log = kit(fresh_dsn, tmp_path)
        with proc:
            wait_states(conn, quick, FINAL, proc=proc)
            wait_until(lambda: len([e for e in executions(log) if e.startswith("sleep")]) == 3, 20, "slow runs started")
            proc.kill()
        assert all(r[1] == "running" for r in runs(conn, slow))
        wait_states(conn, slow, FINAL, timeout=20)
        assert [r[1] for r in runs(conn, slow)] == ["lost"] * 3
        proc2, _, log2 = kit(fresh_dsn, tmp_path)
        with proc2:
            retries = wait_until(lambda: [r[0] for r in conn.execute(
                "SELECT run_id FROM cronbox.runs WHERE job_id = (SELECT job_id FROM cronbox.job WHERE name = 'kit-sleep') "
                "AND attempt = 2").fetchall()] if conn.execute(
                "SELECT count(*) FROM cronbox.runs WHERE attempt = 2").fetchone()[0] == 3 else None, 20, "retries")
            rows = wait_states(conn, retries, FINAL, proc=proc2)
            assert [r[1] for r in rows] == ["succeeded"] * 3
            assert proc2.terminate() == 0
        assert [r[1] for r in runs(conn, quick)] == ["succeeded"] * 5, "finished before the kill, still finished"
        assert len(executions(log2)) == 3, "only the rescued runs ran again"
