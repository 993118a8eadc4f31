"""A poller whose database turns read-only (what a demoted primary is: the Patroni suite,
tests/test_patroni.py, does it with a real switchover) neither dispatches nor quarantines jobs
for it, says so in its log and on /healthz, and resumes by itself once writes are accepted
again. Here the database is made read-only with `default_transaction_read_only` and the
poller's sessions are ended, so its reconnects meet a read-only server."""

from __future__ import annotations


from psycopg import sql
from psycopg.conninfo import conninfo_to_dict

from cronbox import db
from cronbox.pgcluster import free_port

from .procs import Proc, http_get, wait_until


def test_poller_on_a_read_only_server_says_so_and_resumes_when_it_takes_writes(fresh_dsn, pg, tmp_path):
    dbname = str(conninfo_to_dict(fresh_dsn)["dbname"])
    with db.connect(fresh_dsn) as conn:
        conn.execute("SELECT cronbox.schedule('tick', every => '1 second', overlap => 'allow')")

    def dispatched() -> int:
        with db.connect(fresh_dsn) as conn:  # reads work on a read-only server
            return conn.execute("SELECT count(*) FROM cronbox.runs WHERE dispatched_at IS NOT NULL").fetchone()[0]

    def end_sessions() -> None:
        with db.connect(pg.admin_dsn) as su:
            su.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s"
                       " AND pid <> pg_backend_pid()", (dbname,))

    port = free_port()
    with Proc("poller", fresh_dsn, tmp_path, CRONBOX_METRICS_PORT=str(port), CRONBOX_LISTEN_DSN="off") as poller:
        wait_until(lambda: http_get(port)[0] == 200 and dispatched() >= 2, 60, "/healthz 200 and dispatches")
        with db.connect(pg.admin_dsn) as su:
            su.execute(sql.SQL("ALTER DATABASE {} SET default_transaction_read_only = on").format(sql.Identifier(dbname)))
        try:
            end_sessions()
            status, body = wait_until(lambda: (h := http_get(port))[0] == 503 and "read-only" in h[1] and h, 60,
                                      "/healthz 503 saying read-only")
            assert "nothing is dispatched or acked there" in body, body
            wait_until(lambda: "read-only" in poller.output, 30, "the log saying read-only")
            stalled = dispatched()
            assert http_get(port)[0] == 503
            assert dispatched() == stalled  # nothing written while read-only
        finally:
            with db.connect(pg.admin_dsn) as su:
                su.execute(sql.SQL("ALTER DATABASE {} RESET default_transaction_read_only").format(sql.Identifier(dbname)))
        wait_until(lambda: http_get(port)[0] == 200, 60, "/healthz 200 again")
        wait_until(lambda: dispatched() >= stalled + 2, 60, "dispatches again")
        assert poller.terminate() == 0, poller.output
    with db.connect(fresh_dsn) as conn:
        assert conn.execute("SELECT paused FROM cronbox.job WHERE name = 'tick'").fetchone() == (False,)
    assert "quarantined" not in poller.output
