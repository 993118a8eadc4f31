"""The worker kit in pull mode, as a real `cronbox worker` process against a real database."""

from __future__ import annotations

from pathlib import Path

from cronbox.worker.settings import ERROR_LIMIT

from .procs import Proc, wait_until
from .worker_support import autocommit, enqueue, executions, kit, runs, wait_states

FINAL = {"succeeded", "failed", "cancelled", "lost"}


def test_pull_worker_completes_runs_with_their_results(fresh_dsn: str, tmp_path: Path) -> None:
    with autocommit(fresh_dsn) as conn:
        ids = enqueue(conn, 25, "ok", payload={"n": 7})
        proc, _, log = kit(fresh_dsn, tmp_path, CRONBOX_WORKER_CONCURRENCY="4")
        with proc:
            rows = wait_states(conn, ids, FINAL, proc=proc)
            # the worker shows in cronbox.processes (so in `cronbox status`) while it runs
            shown = wait_until(lambda: conn.execute(
                "SELECT name, live FROM cronbox.processes WHERE kind = 'worker'").fetchall(), 10, "the worker registered")
            assert len(shown) == 1 and shown[0][0].startswith("worker:") and shown[0][1], shown
            assert {r[1] for r in rows} == {"succeeded"}
            for run_id, _, attempt, result, error, worker in rows:
                assert result == {"echo": {"n": 7}, "key": f"{run_id}:{attempt}", "attempt": attempt,
                                  "has_deadline": True}
                assert error is None and worker.startswith("worker:")
            assert proc.terminate() == 0
        assert conn.execute("SELECT count(*) FROM cronbox.processes WHERE kind = 'worker'").fetchone()[0] == 0
        assert sorted(executions(log)) == sorted(f"ok {i}:1" for i in ids)  # each exactly once


def test_exceptions_fail_runs_retryable_unless_fail_says_otherwise(fresh_dsn: str, tmp_path: Path) -> None:
    """Also: a handler's exception is logged with its traceback and the run keeps it (bounded);
    a job's own handler takes its runs within a queue, and its retry policy is applied."""
    with autocommit(fresh_dsn) as conn:
        boom = enqueue(conn, 2, "boom", max_attempts=3)
        fatal = enqueue(conn, 2, "fatal", max_attempts=3)
        special = enqueue(conn, 1, "mixed", job="special")
        other = enqueue(conn, 1, "mixed")
        proc, _, log = kit(fresh_dsn, tmp_path)
        with proc:
            rows = wait_states(conn, boom + fatal + special + other, FINAL, proc=proc)
            proc.terminate()
        by_id = {r[0]: r for r in rows}
        for i in boom:
            assert by_id[i][1] == "failed"
            error = by_id[i][4]
            assert error.startswith("RuntimeError: kaput xxx") and error.splitlines()[0].endswith("...[truncated]")
            assert "Traceback (most recent call last)" in error and "in boom" in error
            assert len(error) <= ERROR_LIMIT
        for i in fatal:
            assert by_id[i][1] == "failed" and by_id[i][4] == "bad input"
        output = proc.output
        assert output.count("handler raised run_id=") == 2 and "Traceback (most recent call last)" in output
        assert output.count("handler failed the run") == 2  # a Fail is a decision: logged, no traceback
        assert by_id[special[0]][1:4:2] == ("succeeded", {"by": "special", "tries": 3})
        assert executions(log, "try1") and executions(log, "try2") and executions(log, "try3")
        assert output.count("handler raised, calling it again") == 2
        assert by_id[other[0]][3] == {"by": "default"}
        retries = dict(conn.execute(
            "SELECT retry_of, attempt FROM cronbox.job_future WHERE retry_of = ANY(%s)", (boom + fatal,)).fetchall())
        assert retries == {i: 2 for i in boom}, "a retryable failure schedules attempt 2; Fail(retryable=False) does not"


def test_handler_outlives_its_lease_only_while_heartbeating(fresh_dsn: str, tmp_path: Path) -> None:
    """Lease 1 s, handler 3 s, the poller reaping every 200 ms: only the kit's heartbeats keep
    the run. Once the lease is gone anyway (expired and reaped), the next heartbeat answers
    'cancel': the handler is stopped and its result is not applied (a late report only)."""
    with autocommit(fresh_dsn) as conn, Proc("poller", fresh_dsn, tmp_path, CRONBOX_REAP_INTERVAL="200ms"):
        alive = enqueue(conn, 1, "long", payload={"seconds": 3}, timeout="1 second")
        proc, _, log = kit(fresh_dsn, tmp_path, CRONBOX_WORKER_CANCEL_GRACE="100ms")
        with proc:
            rows = wait_states(conn, alive, FINAL, proc=proc)
            assert rows[0][1] == "succeeded" and rows[0][3] == {"slept": 3}
            gone = enqueue(conn, 1, "long", payload={"seconds": 600}, timeout="3 seconds")
            wait_until(lambda: f"long {gone[0]}:1" in executions(log), 20, "the long handler started")
            with conn.transaction():  # its heartbeats failed, say: the lease ran out and was reaped
                conn.execute("UPDATE cronbox.outbox SET run_lease_until = now() - interval '1 second' WHERE outbox_id = %s",
                             (gone[0],))
                conn.execute("SELECT cronbox.reap_lost(10)")
            assert runs(conn, gone)[0][1] == "lost"
            report = wait_until(lambda: conn.execute("SELECT late_report FROM cronbox.runs WHERE run_id = %s",
                                                     (gone[0],)).fetchone()[0], 20, "the kit's (late) report")
            assert report["report"] == "failed" and report["error"] == "cancelled"
            assert runs(conn, gone)[0][1] == "lost", "a report for a run no longer the worker's changes nothing"
            assert proc.terminate() == 0


def test_cancel_reaches_a_running_handler(fresh_dsn: str, tmp_path: Path) -> None:
    with autocommit(fresh_dsn) as conn:
        ids = enqueue(conn, 2, "cooperative", payload={"seconds": 60}, timeout="3 seconds")
        proc, _, log = kit(fresh_dsn, tmp_path)
        with proc:
            wait_until(lambda: len(executions(log)) == 2, 20, "both handlers running")
            for i in ids:
                assert conn.execute("SELECT cronbox.cancel(%s)", (i,)).fetchone()[0] == "cancel_requested"
            rows = wait_states(conn, ids, FINAL, timeout=15, proc=proc)
            assert {r[1] for r in rows} == {"cancelled"}
            assert sorted(executions(log, "cancelled=True")) == sorted(f"cooperative {i}:1" for i in ids)
            proc.terminate()


def test_deadline_exceeded_cancels_the_handler_and_fails_the_run(fresh_dsn: str, tmp_path: Path) -> None:
    with autocommit(fresh_dsn) as conn:
        ids = enqueue(conn, 1, "stubborn", timeout="2 seconds", max_attempts=2)
        ok = enqueue(conn, 1, "ok")  # a canary on another queue keeps going meanwhile
        proc, _, _ = kit(fresh_dsn, tmp_path, CRONBOX_WORKER_CANCEL_GRACE="200ms")
        with proc:
            assert wait_states(conn, ok, FINAL, proc=proc)[0][1] == "succeeded"
            rows = wait_states(conn, ids, FINAL, timeout=15, proc=proc)
            assert rows[0][1] == "failed" and rows[0][4].startswith("deadline exceeded")
            assert conn.execute("SELECT count(*) FROM cronbox.job_future WHERE retry_of = %s",
                                (ids[0],)).fetchone()[0] == 1, "a deadline miss is retryable"
            proc.terminate()


def test_pull_worker_serves_metrics_and_healthz(fresh_dsn: str, tmp_path: Path) -> None:
    import urllib.request

    from cronbox.pgcluster import free_port

    port = free_port()
    with autocommit(fresh_dsn) as conn:
        ids = enqueue(conn, 3, "ok")
        proc, _, _ = kit(fresh_dsn, tmp_path, CRONBOX_METRICS_PORT=str(port))
        with proc:
            wait_states(conn, ids, FINAL, proc=proc)

            def get(path: str) -> tuple[int, str]:
                try:
                    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as r:
                        return r.status, r.read().decode()
                except OSError:
                    return 0, ""

            assert wait_until(lambda: get("/healthz")[0] == 200, 20, "/healthz 200")
            text = wait_until(lambda: 'cronbox_worker_runs_total{outcome="succeeded",queue="ok"} 3.0' in get("/metrics")[1]
                              and get("/metrics")[1], 20, "the worker's run counter")
            assert "cronbox_worker_inflight 0.0" in text and "cronbox_worker_handler_seconds_bucket" in text
            assert proc.terminate() == 0


def test_a_result_the_database_refuses_fails_that_run_only(fresh_dsn: str, tmp_path: Path) -> None:
    with autocommit(fresh_dsn) as conn:
        bad = enqueue(conn, 2, "nul", max_attempts=3)
        good = enqueue(conn, 10, "ok")
        proc, _, _ = kit(fresh_dsn, tmp_path)
        with proc:
            rows = {r[0]: r for r in wait_states(conn, bad + good, FINAL, proc=proc)}
            assert all(rows[i][1] == "succeeded" for i in good), "the rest of the batch is reported"
            for i in bad:
                assert rows[i][1] == "failed" and rows[i][4].startswith("result holds a NUL character")
            assert conn.execute("SELECT count(*) FROM cronbox.job_future WHERE retry_of = ANY(%s)",
                                (bad,)).fetchone()[0] == 0, "not retryable: the same result would be refused again"
            assert proc.terminate() == 0
