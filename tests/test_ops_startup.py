"""A poller or relay started before its database waits for it: it retries with backoff,
says so in the log naming the host:port it tried, and starts working once a writable primary
answers. An operator-set CRONBOX_STARTUP_TIMEOUT makes it give up with one line instead."""

from __future__ import annotations

import subprocess
import tempfile
from pathlib import Path

import psycopg
import pytest

from cronbox import db
from cronbox.migrate import migrate
from cronbox.pgcluster import FAST_SETTINGS, Cluster, free_port

from .conftest import cronbox_cmd
from .procs import Proc, wait_until


@pytest.fixture
def late_cluster():
    """A private cluster initialised but not started, on a port chosen now."""
    tmp = Path(tempfile.mkdtemp(prefix="cronbox-late-"))
    tmp.chmod(0o755)
    port = free_port()
    # synchronous_commit on: an immediate stop must not lose what was committed before it
    cluster = Cluster(tmp / "pg", settings={**FAST_SETTINGS, "synchronous_commit": "on", "port": str(port)})
    cluster.init()
    try:
        yield cluster, port
    finally:
        cluster.stop(mode="immediate")
        subprocess.run(["rm", "-rf", str(tmp)], check=False)


def test_poller_and_relay_started_before_their_database_wait_and_then_work(late_cluster, tmp_path):
    cluster, port = late_cluster
    dsn = f"postgresql://postgres@127.0.0.1:{port}/postgres"
    cluster.start()  # migrated and scheduled, then crashed: the next start replays WAL
    migrate(dsn)
    with db.connect(dsn) as conn:
        conn.execute("SELECT cronbox.schedule('tick', every => '1 second')")
    cluster.stop(mode="immediate")
    with Proc("poller", dsn, tmp_path) as poller, Proc("relay", dsn, tmp_path, CRONBOX_SINKS="*=log") as relay:
        for proc in (poller, relay):
            wait_until(lambda p=proc: "database not ready, waiting" in p.output and f"127.0.0.1:{port}" in p.output,
                       timeout=30, what=f"{proc.command} saying it waits for 127.0.0.1:{port}")
            assert proc.popen.poll() is None, proc.output
        cluster.start()

        def delivered() -> bool:  # (a non-empty dict would count as done for wait_until)
            with db.connect(dsn) as conn:
                states = dict(conn.execute("SELECT state, count(*) FROM cronbox.runs GROUP BY 1").fetchall())
                return sum(n for st, n in states.items() if st != "dispatched") >= 2

        wait_until(delivered, timeout=60, what="runs dispatched by the poller and delivered by the relay")
        assert "database reachable, starting" in poller.output
        assert poller.terminate() == 0, poller.output
        assert relay.terminate() == 0, relay.output


def test_startup_timeout_gives_up_with_one_line_naming_the_host(tmp_path):
    port = free_port()  # nothing listens there
    dsn = f"postgresql://postgres@127.0.0.1:{port}/postgres"
    relay = Proc("relay", dsn, tmp_path, CRONBOX_STARTUP_TIMEOUT="1s", CRONBOX_SINKS="*=log")
    assert relay.popen.wait(30) == 1, relay.output
    last = relay.output.strip().splitlines()[-1]
    assert last.startswith("cronbox: no writable PostgreSQL after"), relay.output
    assert f"127.0.0.1:{port}" in last


def test_cli_connection_errors_name_the_host_and_port_tried(tmp_path):
    port = free_port()
    env = {"DATABASE_URL": f"postgresql://postgres@127.0.0.1:{port}/postgres", "PATH": "/usr/bin:/bin"}
    out = subprocess.run(cronbox_cmd("status"), env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 1
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and f"tried 127.0.0.1:{port}" in lines[0], out.stderr


def test_poller_and_relay_started_with_only_a_standby_wait_until_it_is_promoted(tmp_path):
    """Only a streaming standby is reachable (its primary is gone): both processes refuse it
    (target_session_attrs=read-write), say so naming it, and start working once it is promoted."""
    root = Path(tempfile.mkdtemp(prefix="cronbox-standby-"))
    root.chmod(0o755)
    primary = Cluster(root / "primary", settings={**FAST_SETTINGS, "synchronous_commit": "on"})
    standby = Cluster(root / "standby", settings={**FAST_SETTINGS, "synchronous_commit": "on"})
    try:
        migrate(primary.start())
        with db.connect(primary.dsn()) as conn:
            conn.execute("SELECT cronbox.schedule('tick', every => '1 second')")
        standby.basebackup(primary)
        dsn = standby.start()
        primary.stop(mode="fast")  # a clean stop: everything committed is on the standby
        with Proc("poller", dsn, tmp_path) as poller, Proc("relay", dsn, tmp_path, CRONBOX_SINKS="*=log") as relay:
            for proc in (poller, relay):
                wait_until(lambda p=proc: "database not ready, waiting" in p.output and "read-only" in p.output
                           and f"127.0.0.1:{standby.port}" in p.output,
                           timeout=60, what=f"{proc.command} refusing the standby at 127.0.0.1:{standby.port}")
                assert proc.popen.poll() is None, proc.output
            with db.connect(dsn) as conn:  # nothing was written while it was a standby
                assert conn.execute("SELECT pg_is_in_recovery()").fetchone()[0] is True
                assert conn.execute("SELECT count(*) FROM cronbox.runs").fetchone()[0] == 0
            standby.promote()

            def delivered() -> bool:
                with db.connect(dsn) as conn:
                    states = dict(conn.execute("SELECT state, count(*) FROM cronbox.runs GROUP BY 1").fetchall())
                    return sum(n for st, n in states.items() if st != "dispatched") >= 2

            wait_until(delivered, timeout=60, what="runs dispatched and delivered after the promotion")
            assert "database reachable, starting" in poller.output and "database reachable, starting" in relay.output
            assert poller.terminate() == 0, poller.output
            assert relay.terminate() == 0, relay.output
    finally:
        standby.stop(mode="immediate")
        primary.stop(mode="immediate")
        subprocess.run(["rm", "-rf", str(root)], check=False)


def test_process_connections_give_up_a_vanished_host_and_keep_what_the_dsn_says(pg):
    """A host lost in a failover sends no RST: without keepalives and tcp_user_timeout a
    connection to it would hang for TCP's ~15 minutes. The processes' DSN gets bounded
    defaults; whatever the DSN sets itself wins."""
    info = psycopg.conninfo.conninfo_to_dict(db.session_dsn("host=a,b port=1,2 dbname=x", write=True))
    assert info["target_session_attrs"] == "read-write" and int(info["connect_timeout"]) >= 2
    assert (info["keepalives"], info["keepalives_idle"], info["tcp_user_timeout"]) == ("1", "5", "10000")
    mine = psycopg.conninfo.conninfo_to_dict(db.session_dsn(
        "host=a dbname=x keepalives_idle=60 tcp_user_timeout=0 target_session_attrs=any", write=True))
    assert (mine["keepalives_idle"], mine["tcp_user_timeout"], mine["target_session_attrs"]) == ("60", "0", "any")
    with db.connect(pg.admin_dsn, write=True) as conn:  # libpq takes them for the live connection
        used = conn.info.get_parameters()
        assert (used.get("keepalives_idle"), used.get("tcp_user_timeout")) == ("5", "10000"), used
