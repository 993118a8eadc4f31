"""The console as a process in cronbox.processes: it registers at start under the least
privilege there is for it (cronbox_web, through SET ROLE from a NOINHERIT login role, as
deploy/ sets it up), heartbeats, shows in `cronbox status`, and is gone after a clean stop."""

from __future__ import annotations

import os
import subprocess
import urllib.request
from collections.abc import Iterator

import orjson
import psycopg
import pytest
from psycopg import sql

from cronbox import db
from cronbox.pgcluster import free_port

from .procs import Proc, cronbox_cmd, wait_until
from .roles import PASSWORD, logins  # noqa: F401  (fixture)
from .web_support import _HASH  # noqa: PLC2701


@pytest.fixture
def console_login(pg, fresh_dsn) -> Iterator[str]:
    """A login role set up as deploy/compose/roles.sql does for the console: NOINHERIT,
    granted the roles its users map to and cronbox_web."""
    name = f"t{os.getpid()}_console"
    with db.connect(pg.admin_dsn) as su:
        su.execute(sql.SQL("DROP ROLE IF EXISTS {}").format(sql.Identifier(name)))
        su.execute(sql.SQL("CREATE ROLE {} LOGIN NOINHERIT PASSWORD {}").format(sql.Identifier(name),
                                                                               sql.Literal(PASSWORD)))
        su.execute(sql.SQL("GRANT cronbox_admin, cronbox_reader, cronbox_web TO {}").format(sql.Identifier(name)))
    try:
        yield name
    finally:
        with db.connect(pg.admin_dsn) as su:
            su.execute(sql.SQL("DROP OWNED BY {}").format(sql.Identifier(name)))
            su.execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(name)))


def _as(dsn: str, user: str) -> str:
    info = psycopg.conninfo.conninfo_to_dict(dsn)
    info.update(user=user, password=PASSWORD)
    return psycopg.conninfo.make_conninfo(**info)


def _consoles(dsn: str) -> list[tuple]:
    with db.connect(dsn) as conn:
        return conn.execute("SELECT pid, live, info FROM cronbox.processes WHERE kind = 'console'").fetchall()


def test_cronbox_web_may_register_a_console_and_nothing_else(fresh_dsn, console_login):
    with db.connect(fresh_dsn) as su:
        poller = su.execute("SELECT cronbox.register_process('poller', 'poller:h:1', 'h', 1, 'test')").fetchone()[0]
        su.commit()
    with db.connect(_as(fresh_dsn, console_login), autocommit=True) as conn:
        # NOINHERIT: nothing without SET ROLE
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute("SELECT cronbox.register_console('console:h:2', 'h', 2, 'test')")
        conn.execute("SET ROLE cronbox_web")
        me = conn.execute("SELECT cronbox.register_console('console:h:2', 'h', 2, 'test')").fetchone()[0]
        assert conn.execute("SELECT cronbox.heartbeat_console(%s, '{\"url\": \"x\"}')", (me,)).fetchone()[0]
        # another kind's entry: neither touched nor taken over
        assert not conn.execute("SELECT cronbox.heartbeat_console(%s)", (poller,)).fetchone()[0]
        assert not conn.execute("SELECT cronbox.deregister_console(%s)", (poller,)).fetchone()[0]
        with pytest.raises(psycopg.errors.ObjectNotInPrerequisiteState):
            conn.execute("SELECT cronbox.register_console('poller:h:1', 'h', 9, 'test')")
        for stmt in ("SELECT cronbox.register_worker('w', 'h', 3, 'test')",
                     "SELECT cronbox.register_process('poller', 'p', 'h', 3, 'test')",
                     "SELECT cronbox.heartbeat_process(1)", "SELECT cronbox.pause('x')",
                     "SELECT count(*) FROM cronbox.processes", "SELECT count(*) FROM cronbox.runs"):
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                conn.execute(stmt)
        assert conn.execute("SELECT cronbox.deregister_console(%s)", (me,)).fetchone()[0]
    with db.connect(fresh_dsn) as su:
        assert su.execute("SELECT kind FROM cronbox.processes").fetchall() == [("poller",)]


def _status_json(dsn: str) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PG", "CRONBOX_", "DATABASE_URL"))}
    out = subprocess.run(cronbox_cmd("status", "--json"), env={**env, "DATABASE_URL": dsn},
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return orjson.loads(out.stdout)


@pytest.mark.slow
def test_a_running_console_is_listed_while_it_runs_and_gone_after_a_clean_stop(fresh_dsn, logins,  # noqa: F811
                                                                               console_login, tmp_path):
    port = free_port()
    web = Proc("web", _as(fresh_dsn, console_login), tmp_path, _args=f"--port {port}",
               CRONBOX_WEB_USERS=f"ops:{_HASH}:cronbox_admin,viewer:{_HASH}:cronbox_reader")
    try:
        rows = wait_until(lambda: _consoles(fresh_dsn), timeout=30, what="the console in cronbox.processes")
        assert rows == [(web.popen.pid, True, {"url": f"http://127.0.0.1:{port}/", "logins": 2})], rows
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=5) as resp:
            assert resp.status == 200
        # `cronbox status` (as an operator) lists it in its processes section
        procs = _status_json(logins.dsn(fresh_dsn, "reader"))["processes"]
        assert [(p["kind"], p["pid"], p["live"]) for p in procs] == [("console", web.popen.pid, True)], procs
        # it heartbeats: last_seen moves
        with db.connect(fresh_dsn) as conn:
            first = conn.execute("SELECT last_seen FROM cronbox.process WHERE kind = 'console'").fetchone()[0]
        wait_until(lambda: _last_seen(fresh_dsn) > first, timeout=20, what="a heartbeat")
        assert web.terminate() == 0, web.output
        assert _consoles(fresh_dsn) == [], web.output
        assert "not shown in cronbox.processes" not in web.output
    finally:
        web.kill()


def _last_seen(dsn: str):
    with db.connect(dsn) as conn:
        return conn.execute("SELECT last_seen FROM cronbox.process WHERE kind = 'console'").fetchone()[0]


@pytest.mark.slow
def test_a_console_whose_role_may_not_register_still_serves_and_says_why(fresh_dsn, logins, tmp_path):  # noqa: F811
    port = free_port()
    # a reader login on loopback, no console users: it has no cronbox_web
    web = Proc("web", logins.dsn(fresh_dsn, "reader"), tmp_path, _args=f"--port {port}")
    try:
        def serving() -> bool:
            assert web.popen.poll() is None, web.output
            try:
                return urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=5).status == 200
            except OSError:
                return False
        wait_until(serving, timeout=30, what="the console to serve")
        wait_until(lambda: "not shown in cronbox.processes" in web.output, timeout=10, what="the warning")
        assert f"GRANT cronbox_web TO {logins.name('reader')}" in web.output
        assert _consoles(fresh_dsn) == []
        assert web.terminate() == 0, web.output
    finally:
        web.kill()
