"""SIGTERM while the database is down: the poller stops within its shutdown timeout, exit 0."""

from __future__ import annotations

import os
import time

from cronbox import db
from cronbox.migrate import migrate
from cronbox.pgcluster import FAST_SETTINGS, Cluster

from .procs import Proc, wait_until


def test_poller_stops_promptly_on_sigterm_while_the_database_is_down(tmp_path):
    os.chmod(tmp_path, 0o755)
    cluster = Cluster(tmp_path / "pg", settings=FAST_SETTINGS)  # private: it gets stopped
    dsn = cluster.start()
    try:
        migrate(dsn)
        with db.connect(dsn) as conn:
            conn.execute("SELECT cronbox.schedule('tick', cron => '* * * * * *', overlap => 'allow')")
        with Proc("poller", dsn, tmp_path, CRONBOX_SHUTDOWN_TIMEOUT="3s") as poller:
            def runs() -> int:
                with db.connect(dsn) as conn:
                    return conn.execute("SELECT count(*) FROM cronbox.runs").fetchone()[0]

            wait_until(lambda: runs() > 0, what="a dispatched run")
            cluster.stop()
            # the next tick then waits for a pool connection that cannot be made
            wait_until(lambda: "error connecting in 'poller'" in poller.output,
                       what="the poller's pool failing to reconnect")
            started = time.monotonic()
            assert poller.terminate(timeout=20) == 0, poller.output
            assert time.monotonic() - started < 10, poller.output
    finally:
        cluster.stop()
