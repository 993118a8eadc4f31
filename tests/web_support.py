"""Helpers for the web console tests: console users mapped to the test login roles, a
database with a few schedules, runs and a dead letter, and the console itself."""

from __future__ import annotations

import base64
import re
from collections.abc import AsyncIterator
from typing import Any

import psycopg
import pytest
from aiohttp.test_utils import TestClient, TestServer
from psycopg import sql

from cronbox import db
from web import settings as web_settings
from web.app import build
from web.auth import hash_password

from .roles import logins  # noqa: F401  (fixture)

PASSWORD = "console-pw"
# console user -> login role suffix in tests/roles.py
CONSOLE_USERS = {"admin": "admin", "reader": "reader", "alice": "alice", "bob": "bob"}
_HASH = hash_password(PASSWORD)


def users_env(logins: Any) -> str:
    return ",".join(f"{u}:{_HASH}:{logins.name(role)}" for u, role in CONSOLE_USERS.items())


def seed(dsn: str, logins: Any) -> dict[str, Any]:
    """Schedules (one per owner), a dispatched run, a failed run and a dead letter."""
    out: dict[str, Any] = {}
    with db.connect(dsn) as conn:
        for who, name, cron in (("admin", "nightly-report", "30 2 * * *"), ("alice", "alice-job", "*/5 * * * *"),
                                ("bob", "bob-job", "0 * * * *")):
            conn.execute(sql.SQL("SET ROLE {}").format(sql.Identifier(logins.name(who))))
            conn.execute("SELECT cronbox.schedule(%s, cron => %s, timezone => 'Europe/Berlin')", (name, cron))
            conn.execute("RESET ROLE")
        conn.execute("SELECT cronbox.schedule('after-report', after => ARRAY['nightly-report'])")
        conn.execute("SELECT cronbox.trigger('nightly-report', payload => %s)", (db.Jsonb({"note": "<b>hi</b>"}),))
        conn.execute("SELECT cronbox.trigger('alice-job')")
        conn.execute("SELECT * FROM cronbox.dispatch(1000)")
        rows = conn.execute("SELECT run_id, job FROM cronbox.runs ORDER BY run_id").fetchall()
        out["runs"] = {job: run_id for run_id, job in rows}
        conn.execute("SELECT cronbox.start_run(%s, 'worker-1')", (out["runs"]["alice-job"],))
        conn.execute("SELECT cronbox.fail_run(%s, 'boom: <script>alert(1)</script>', false)",
                     (out["runs"]["alice-job"],))
        out["dead_letter"] = conn.execute(
            "INSERT INTO cronbox.dead_letter (outbox_id, run_id, queue, kind, message, timeout, created_at, attempts, last_error) "
            "VALUES (1, NULL, 'default', 'notification', '{\"job\": \"nightly-report\"}', '5 minutes', now(), 5, "
            "'HTTP 410 from worker') RETURNING dead_letter_id").fetchone()[0]
    return out


def basic(user: str, password: str = PASSWORD) -> dict[str, str]:
    return {"Authorization": "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()}


def csrf_from(html: str) -> str:
    m = re.search(r'name="csrf" value="([0-9a-f]+)"', html)
    assert m, "no CSRF field on the page"
    return m.group(1)


def scalar(dsn: str, query: str, *params: Any) -> Any:
    with psycopg.connect(dsn, autocommit=True) as conn:
        row = conn.execute(query, params).fetchone()
        return row[0] if row else None


@pytest.fixture
async def consoles(fresh_dsn, logins) -> AsyncIterator[Any]:  # noqa: F811
    """A seeded database and a factory of in-process consoles over it, one per settings."""
    data = seed(fresh_dsn, logins)
    pool = await db.open_pool(fresh_dsn, max_size=2, name="web-test")
    clients: list[TestClient] = []

    async def make(env: dict[str, str] | None = None) -> TestClient:
        env = {"CRONBOX_WEB_USERS": users_env(logins)} if env is None else env
        client = TestClient(TestServer(build(web_settings.from_env(env), pool)))
        await client.start_server()
        clients.append(client)
        return client

    make.dsn, make.data, make.users = fresh_dsn, data, users_env(logins)  # type: ignore[attr-defined]
    try:
        yield make
    finally:
        for client in clients:
            await client.close()
        await pool.close()


def seed_console_cases(dsn: str) -> dict[str, Any]:
    """What an operator meets on a shared console: a quarantined schedule, names a browser
    would rewrite in a path, a wide payload, an open circuit breaker, a full resource pool
    with a fire waiting for its units."""
    wide = {"blob": "x" * 800, "nested": {"list": list(range(40))}}
    with db.connect(dsn) as conn:
        conn.execute("SELECT cronbox.schedule('broken-job', cron => '*/10 * * * *')")
        job_id = conn.execute("SELECT job_id FROM cronbox.job WHERE name = 'broken-job'").fetchone()[0]
        conn.execute("SELECT cronbox.quarantine_job(%s, 'cron: cannot compute the next fire (<boom>)')", (job_id,))
        for name in ("a/../b", "..", "b"):
            conn.execute("SELECT cronbox.schedule(%s, every => '1 hour')", (name,))
        conn.execute("SELECT cronbox.schedule('wide-payload', every => '1 hour', payload => %s)", (db.Jsonb(wide),))
        conn.execute("SELECT cronbox.set_pool('gpu', 4)")
        for name in ("gpu-train", "gpu-eval"):
            conn.execute("SELECT cronbox.schedule(%s, every => '1 day', needs => '{\"gpu\": 4}')", (name,))
            conn.execute("SELECT cronbox.trigger(%s)", (name,))
        conn.execute("SELECT * FROM cronbox.dispatch(100)")  # gpu-train holds the units, gpu-eval waits
        conn.execute("SELECT cronbox.register_process('relay', 'relay:test:9', 'test', 9, 'test')")
        conn.execute("""UPDATE cronbox.process SET info = '{"breakers": {"flaky-q": {"state": "open",
                        "consecutive_failures": 7, "probe_every_s": 30}}}' WHERE name = 'relay:test:9'""")
    return {"quarantined": "broken-job"}
