"""cronbox behind PgBouncer in transaction mode: the poller, the relay and a pull worker reach
the database only through PgBouncer (pool_mode = transaction), the LISTEN connections go
direct (CRONBOX_LISTEN_DSN) or are turned off (`off`: polling only). What does not work
through transaction pooling, and why, is in docs/operations.md ("PgBouncer")."""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import tempfile
from pathlib import Path

import psycopg
import pytest

from cronbox import db
from cronbox.pgcluster import free_port

from .procs import Proc, wait_until
from .worker_support import APP, autocommit

PGBOUNCER = shutil.which("pgbouncer") or "/usr/sbin/pgbouncer"
pytestmark = pytest.mark.skipif(not Path(PGBOUNCER).exists(), reason="pgbouncer not installed (.ci/run installs it)")


@pytest.fixture
def bouncer(pg):
    """PgBouncer in transaction mode in front of the test cluster, on a free port; run as the
    postgres OS user when we are root (it refuses to run as root)."""
    info = psycopg.conninfo.conninfo_to_dict(pg.admin_dsn)
    root = Path(tempfile.mkdtemp(prefix="cronbox-bouncer-"))
    root.chmod(0o755)
    port = free_port()
    (root / "users.txt").write_text('"postgres" ""\n')
    (root / "pgbouncer.ini").write_text(f"""
[databases]
* = host={info.get('host', '127.0.0.1')} port={info.get('port', 5432)}
[pgbouncer]
listen_addr = 127.0.0.1
listen_port = {port}
unix_socket_dir =
auth_type = trust
auth_file = {root}/users.txt
pool_mode = transaction
max_client_conn = 500
default_pool_size = 20
ignore_startup_parameters = extra_float_digits,options
admin_users = postgres
logfile = {root}/pgbouncer.log
""")
    kwargs = {}
    if os.geteuid() == 0:
        pw = pwd.getpwnam("postgres")
        for f in root.iterdir():
            os.chown(f, pw.pw_uid, pw.pw_gid)
        os.chown(root, pw.pw_uid, pw.pw_gid)
        kwargs = {"user": pw.pw_uid, "group": pw.pw_gid, "extra_groups": []}
    proc = subprocess.Popen([PGBOUNCER, str(root / "pgbouncer.ini")], stdout=subprocess.DEVNULL,
                            stderr=subprocess.STDOUT, **kwargs)

    def up() -> bool:
        try:
            with psycopg.connect(f"host=127.0.0.1 port={port} user=postgres dbname=pgbouncer", autocommit=True,
                                 prepare_threshold=None, connect_timeout=2) as c:
                c.execute("SHOW VERSION")
            return True
        except psycopg.OperationalError:
            return proc.poll() is not None

    try:
        wait_until(up, 30, "pgbouncer accepting connections")
        assert proc.poll() is None, (root / "pgbouncer.log").read_text()
        yield port
    finally:
        proc.terminate()
        proc.wait(20)
        shutil.rmtree(root, ignore_errors=True)


def through(dsn: str, port: int) -> str:
    """The same database, reached through PgBouncer (no `options`: PgBouncer drops them)."""
    info = psycopg.conninfo.conninfo_to_dict(dsn)
    info.pop("options", None)
    return psycopg.conninfo.make_conninfo(**{**info, "host": "127.0.0.1", "port": str(port)})


def clients(port: int, dbname: str) -> int:
    """Client connections PgBouncer holds for the database (its admin console)."""
    with psycopg.connect(f"host=127.0.0.1 port={port} user=postgres dbname=pgbouncer", autocommit=True,
                         prepare_threshold=None) as c:
        cur = c.execute("SHOW CLIENTS")
        cols = [d.name for d in cur.description]
        return sum(1 for r in cur.fetchall() if dict(zip(cols, r))["database"] == dbname)


def test_poller_relay_and_pull_worker_work_through_pgbouncer_in_transaction_mode(fresh_dsn, bouncer, tmp_path):
    pooled = through(fresh_dsn, bouncer)
    dbname = psycopg.conninfo.conninfo_to_dict(fresh_dsn)["dbname"]
    with autocommit(fresh_dsn) as conn:
        # overlap 'allow': a log-sink delivery stays 'delivered' (no worker completes it)
        conn.execute("SELECT cronbox.schedule('pushed', every => '1 second', queue => 'logged', overlap => 'allow')")
        conn.execute("SELECT cronbox.schedule('pulled', every => '1 second', queue => 'ok', overlap => 'allow')")
        log = tmp_path / "executions.log"
        log.touch()
        with Proc("poller", pooled, tmp_path, CRONBOX_LISTEN_DSN=fresh_dsn) as poller, \
                Proc("relay", pooled, tmp_path, CRONBOX_LISTEN_DSN=fresh_dsn, CRONBOX_SINKS="logged=log;ok=postgres") as relay, \
                Proc("worker", pooled, tmp_path, _args=APP, WORKER_TEST_LOG=str(log), CRONBOX_LISTEN_DSN="off") as worker:

            def done() -> bool:
                states = dict(conn.execute(
                    "SELECT job || ':' || state, count(*) FROM cronbox.runs GROUP BY 1").fetchall())
                return (states.get("pushed:delivered", 0) + states.get("pushed:succeeded", 0) >= 3
                        and states.get("pulled:succeeded", 0) >= 3)

            for p in (poller, relay, worker):
                assert p.popen.poll() is None, p.output
            wait_until(done, 60, "runs dispatched, relayed and pulled through PgBouncer")
            assert clients(bouncer, dbname) >= 3  # the pools of the three processes, at least
            assert len(log.read_text().splitlines()) >= 3  # the pull worker ran them
            assert "off (polling only)" in worker.output
            for p in (poller, relay, worker):
                assert p.terminate() == 0, (p.command, p.output)
    with db.connect(fresh_dsn) as conn:
        fires = conn.execute("SELECT job, fire_at, count(*) FROM cronbox.runs WHERE state <> 'missed'"
                             " GROUP BY 1, 2 HAVING count(*) > 1").fetchall()
        assert fires == []  # nothing doubled through the pooler
