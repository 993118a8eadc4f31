"""The thin end-to-end path with real processes: schedule -> poller -> relay -> HTTP worker
-> complete_run -> cronbox.runs shows succeeded."""

from __future__ import annotations

from cronbox import db

from .procs import Proc, demo_worker, wait_until


def test_six_field_cron_job_runs_end_to_end_through_real_processes(fresh_dsn, tmp_path):
    with db.connect(fresh_dsn) as conn:
        conn.execute("SELECT cronbox.schedule('demo', cron => '*/2 * * * * *')")
    worker, port = demo_worker(fresh_dsn, tmp_path)
    # The first fire must not meet a worker that is not listening yet: with the default
    # overlap 'skip', an undelivered run makes the next fires skipped.
    wait_until(lambda: "listening" in worker.output, timeout=30, what="the demo worker to listen")
    with worker, Proc("poller", fresh_dsn, tmp_path) as poller, \
            Proc("relay", fresh_dsn, tmp_path, CRONBOX_SINKS=f"*=http://127.0.0.1:{port}/run") as relay:

        def succeeded() -> list[tuple]:
            with db.connect(fresh_dsn) as conn:
                return conn.execute(
                    "SELECT run_id, fire_at, worker FROM cronbox.runs "
                    "WHERE job = 'demo' AND state = 'succeeded' ORDER BY fire_at").fetchall()

        rows = wait_until(lambda: len(succeeded()) >= 2 and succeeded(), timeout=30,
                          what="two succeeded runs")
        assert relay.terminate() == 0, relay.output
        assert poller.terminate() == 0, poller.output
        assert worker.terminate() == 0, worker.output

    fires = [r[1] for r in rows]
    assert all(f.second % 2 == 0 and f.microsecond == 0 for f in fires)
    assert all(b - a == fires[1] - fires[0] for a, b in zip(fires, fires[1:]))  # consecutive fires, none missed
    assert {r[2] for r in rows} == {"demo-worker"}
    with db.connect(fresh_dsn) as conn:
        # every fire that was dispatched is accounted for: none doubled
        dup = conn.execute("SELECT fire_at FROM cronbox.runs GROUP BY job_id, fire_at, attempt HAVING count(*) > 1").fetchall()
    assert dup == []
