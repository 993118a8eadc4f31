"""The console's access rules, in-process (aiohttp test client, real database): who sees what,
who may act, CSRF, and the bind/auth settings. The browser tests cover the same pages in chromium."""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import AsyncIterator
from datetime import timedelta
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer

from cronbox import db
from cronbox.config import ConfigError
from web import settings as web_settings
from web.app import SECRET, build
from web.auth import hash_password, parse_users, verify_password

from .roles import logins  # noqa: F401  (fixture)
from .web_support import PASSWORD, basic, consoles, csrf_from, scalar, seed, users_env  # noqa: F401


@pytest.fixture
async def console(consoles) -> tuple[TestClient, str, dict]:
    return await consoles(), consoles.dsn, consoles.data


async def _form(client: TestClient, user: str, page: str) -> str:
    resp = await client.get(page, headers=basic(user))
    assert resp.status == 200, await resp.text()
    return csrf_from(await resp.text())


async def test_no_credentials_or_a_wrong_password_get_401(console):
    client, _, _ = console
    assert (await client.get("/")).status == 401
    assert (await client.get("/", headers=basic("admin", "wrong"))).status == 401
    assert (await client.get("/", headers=basic("nobody"))).status == 401
    assert (await client.get("/healthz")).status == 200


async def test_admin_pauses_and_resumes_and_the_change_log_names_the_role(console, logins):  # noqa: F811
    client, dsn, _ = console
    token = await _form(client, "admin", "/schedules/nightly-report")
    resp = await client.post("/actions/pause", data={"csrf": token, "name": "nightly-report", "reason": "db upgrade"},
                             headers=basic("admin"), allow_redirects=False)
    assert resp.status == 303, await resp.text()
    assert scalar(dsn, "SELECT paused FROM cronbox.job WHERE name = 'nightly-report'") is True
    assert scalar(dsn, "SELECT changed_by || ' ' || reason FROM cronbox.schedule_changes "
                       "WHERE job = 'nightly-report' AND action = 'paused'") == f"{logins.name('admin')} db upgrade (web: admin)"
    resp = await client.post("/actions/resume", data={"csrf": token, "name": "nightly-report"}, headers=basic("admin"))
    assert resp.status == 200 and "resumed" in await resp.text()
    assert scalar(dsn, "SELECT paused FROM cronbox.job WHERE name = 'nightly-report'") is False


async def test_reader_sees_no_buttons_and_a_forged_post_is_refused_by_the_database(console):
    client, dsn, _ = console
    resp = await client.get("/schedules/nightly-report", headers=basic("reader"))
    html = await resp.text()
    assert resp.status == 200 and "nightly-report" in html
    assert "/actions/" not in html and "read-only" in html
    # The reader forges a POST with a valid CSRF token (as a page with a form would carry), so
    # only the database can refuse it.
    cookie = client.session.cookie_jar.filter_cookies(client.make_url("/"))["cronbox_csrf"].value
    forged = hmac.new(client.server.app[SECRET], f"{cookie}:reader".encode(), hashlib.sha256).hexdigest()
    resp = await client.post("/actions/pause", data={"csrf": forged, "name": "nightly-report", "reason": "x"},
                             headers=basic("reader"))
    assert resp.status == 403
    assert "permission denied" in await resp.text()
    assert scalar(dsn, "SELECT paused FROM cronbox.job WHERE name = 'nightly-report'") is False


async def test_a_post_without_or_with_a_wrong_csrf_token_is_refused(console):
    client, dsn, _ = console
    await _form(client, "admin", "/schedules/nightly-report")
    for data in ({"name": "nightly-report", "reason": "x"}, {"csrf": "00" * 32, "name": "nightly-report", "reason": "x"}):
        resp = await client.post("/actions/pause", data=data, headers=basic("admin"))
        assert resp.status == 403 and "Cross-site request check failed" in await resp.text()
    token = await _form(client, "admin", "/schedules/nightly-report")
    resp = await client.post("/actions/pause", data={"csrf": token, "name": "nightly-report", "reason": "x"},
                             headers={**basic("admin"), "Origin": "http://evil.example"})
    assert resp.status == 403
    # another user's token does not work either (the token is bound to the user)
    other = await _form(client, "alice", "/schedules/alice-job")
    resp = await client.post("/actions/pause", data={"csrf": other, "name": "nightly-report", "reason": "x"},
                             headers=basic("admin"))
    assert resp.status == 403
    assert scalar(dsn, "SELECT paused FROM cronbox.job WHERE name = 'nightly-report'") is False


async def test_an_owner_sees_and_steers_only_their_own_schedules(console):
    client, dsn, data = console
    html = await (await client.get("/schedules", headers=basic("alice"))).text()
    assert "alice-job" in html and "bob-job" not in html and "nightly-report" not in html
    assert (await client.get("/schedules/bob-job", headers=basic("alice"))).status == 404
    assert (await client.get(f"/runs/{data['runs']['nightly-report']}", headers=basic("alice"))).status == 404
    runs_html = await (await client.get("/runs", headers=basic("alice"))).text()
    assert "alice-job" in runs_html and "nightly-report" not in runs_html
    failed_html = await (await client.get("/runs?state=failed", headers=basic("alice"))).text()
    assert "alice-job" in failed_html and "nightly-report" not in failed_html
    # the overview works for an owner: its own failures and chart, no queues or processes
    # (those views span every owner, so cronbox_user may not read them)
    resp = await client.get("/", headers=basic("alice"))
    html = await resp.text()
    assert resp.status == 200 and "failures</a> in the last hour" in html and "<h2>Queues</h2>" not in html
    assert 'href="/processes"' not in html
    assert (await client.get("/processes", headers=basic("alice"))).status == 403
    assert (await client.get("/dead-letters", headers=basic("alice"))).status == 403
    search = await (await client.get("/schedules?q=JOB", headers=basic("alice"))).text()
    assert "alice-job" in search and "bob-job" not in search
    token = await _form(client, "alice", "/schedules/alice-job")
    resp = await client.post("/actions/pause", data={"csrf": token, "name": "bob-job", "reason": "x"},
                             headers=basic("alice"))
    assert resp.status >= 400
    assert scalar(dsn, "SELECT paused FROM cronbox.job WHERE name = 'bob-job'") is False
    resp = await client.post("/actions/pause", data={"csrf": token, "name": "alice-job", "reason": "mine"},
                             headers=basic("alice"))
    assert resp.status == 200
    assert scalar(dsn, "SELECT paused FROM cronbox.job WHERE name = 'alice-job'") is True


async def test_user_supplied_text_is_escaped(console):
    client, _, data = console
    html = await (await client.get(f"/runs/{data['runs']['alice-job']}", headers=basic("admin"))).text()
    assert "<script>alert(1)</script>" not in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    html = await (await client.get(f"/runs/{data['runs']['nightly-report']}", headers=basic("admin"))).text()
    assert "<b>hi</b>" not in html and "&lt;b&gt;hi&lt;/b&gt;" in html


async def test_cancel_and_bulk_redrive_ask_for_confirmation_first(console):
    client, dsn, data = console
    run_id = data["runs"]["nightly-report"]
    token = await _form(client, "admin", f"/runs/{run_id}")
    resp = await client.post("/actions/cancel", data={"csrf": token, "run_id": str(run_id)}, headers=basic("admin"))
    assert resp.status == 200 and "Yes, go ahead" in await resp.text()
    assert scalar(dsn, "SELECT cancel_requested OR state = 'cancelled' FROM cronbox.runs WHERE run_id = %s", run_id) is False
    resp = await client.post("/actions/cancel", data={"csrf": token, "run_id": str(run_id), "confirm": "yes"},
                             headers=basic("admin"))
    assert resp.status == 200
    assert scalar(dsn, "SELECT cancel_requested OR state = 'cancelled' FROM cronbox.runs WHERE run_id = %s", run_id) is True
    resp = await client.post("/actions/redrive", data={"csrf": token, "everything": "yes"}, headers=basic("admin"))
    assert "Yes, go ahead" in await resp.text()
    assert scalar(dsn, "SELECT count(*) FROM cronbox.dead_letters") == 1


async def test_bad_filters_get_a_clear_400(console):
    client, _, _ = console
    for query in ("state=exploded", "since=yesterday", "before=-1", "before=99999999999999999999"):
        resp = await client.get(f"/runs?{query}", headers=basic("admin"))
        assert resp.status == 400, query
    resp = await client.get("/schedules/" + "x" * 300, headers=basic("admin"))
    assert resp.status == 404


def test_any_bind_but_loopback_needs_users():
    with pytest.raises(ConfigError, match="refusing to listen on 0.0.0.0"):
        web_settings.from_env({}, host="0.0.0.0")
    assert web_settings.from_env({}, host="::1").host == "::1"
    users = f"ops:{hash_password('pw')}:cronbox_reader"
    assert web_settings.from_env({"CRONBOX_WEB_USERS": users}, host="0.0.0.0").auth


@pytest.mark.parametrize("entry, message", [
    ("ops:plain:cronbox_reader", "a hash must look like"),
    ("ops:pbkdf2_sha256$1000$00$00:cronbox_reader", "at least 100000"),
    ("bad user:scrypt$16384$8$1$00$00:r", "bad user name"),
    ("ops:scrypt$16384$8$1$00$00:drop table", "plain role name"),
    ("ops:scrypt$16384$8$1$00$00:r,ops:scrypt$16384$8$1$00$00:r", "listed twice"),
])
def test_bad_user_entries_are_refused_at_start(entry, message):
    with pytest.raises(ConfigError, match=message):
        parse_users(entry)


def test_both_hash_schemes_verify():
    for scheme in ("scrypt", "pbkdf2_sha256"):
        h = hash_password("s3cret", scheme=scheme)
        assert verify_password("s3cret", h) and not verify_password("s3cret!", h)


class _Explain:
    """Wraps a connection so the console's queries are EXPLAINed instead of run."""

    def __init__(self, conn):
        self.conn = conn
        self.plans: list[str] = []

    async def execute(self, query, params=None):
        from psycopg import sql as _sql

        prefix = "EXPLAIN (FORMAT JSON) "
        query = _sql.SQL(prefix) + query if isinstance(query, _sql.Composable) else prefix + query
        cur = await self.conn.execute(query, params)
        self.plans.append(str((await cur.fetchone())[0]))
        return _NoRows()


class _NoRows:
    async def fetchall(self):
        return []

    async def fetchone(self):
        return None


@pytest.mark.parametrize("filters, index", [
    # partitions name their copies of run_queue_history_idx, run_trouble_history_idx, ...
    ({"queue": "q7"}, "_queue_run_id_idx"),
    ({"states": ["failed"]}, "_trouble_run_id_idx"),  # the generated column `trouble` (0190)
    # unfinished: the few from cronbox.unfinished_runs(), then each by primary key
    ({"states": ["running"]}, "_pkey"),
    ({"states": ["dispatched"], "queue": "q7"}, "_pkey"),
    ({"states": ["lost"], "queue": "q7"}, "_run_id_idx"),  # either index serves it
    # several states: each through its own index, merged (failed or lost: the overview's link)
    ({"states": ["failed", "lost"]}, "_trouble_run_id_idx"),
    ({"job_ids": [1]}, "_job_id_run_id_idx"),
    ({"job_ids": [1, 2]}, "_job_id_run_id_idx"),  # a job name as a substring: each job's newest, merged
    ({"before": 1 << 62}, "_pkey"),
    # an owner (row security): each owned job's newest runs, merged
    ({"owned": [1, 2, 3]}, "_job_id_run_id_idx"),
    ({"owned": [1, 2, 3], "states": ["failed"]}, "_run_id_idx"),  # per job: either index (planner, by statistics)
])
async def test_each_runs_filter_is_served_by_an_index(fresh_dsn, filters, index):
    from web import history

    async with await db.aconnect(fresh_dsn, autocommit=False) as conn:
        await conn.execute("SELECT cronbox.ensure_run_partitions(1)")
        await conn.execute("SET LOCAL enable_seqscan = off")
        await conn.execute("SET LOCAL enable_sort = off")
        spy = _Explain(conn)
        owned = filters.pop("owned", None)
        await history.runs(spy, history.Filters(**filters), owned=owned)  # type: ignore[arg-type]
        (plan,) = spy.plans
        assert index in plan and "Seq Scan" not in plan, plan
        # no sort of history: at most one, of the merged newest pages (an owner's jobs, several
        # jobs or states)
        merged = owned is not None or len(filters.get("job_ids") or []) > 1 or len(filters.get("states", [])) > 1
        assert plan.count("'Sort'") <= (1 if merged else 0), plan


def test_cli_refuses_a_public_bind_without_logins_and_hashes_passwords():
    import subprocess

    from .conftest import cronbox_cmd

    env = {"PATH": "/usr/bin:/bin", "DATABASE_URL": "postgresql://127.0.0.1:1/none"}
    out = subprocess.run(cronbox_cmd("web", "--host", "0.0.0.0"), capture_output=True, text=True, timeout=60, env=env)
    assert out.returncode == 1 and out.stderr.count("\n") == 1 and "refusing to listen on 0.0.0.0" in out.stderr
    out = subprocess.run(cronbox_cmd("web", "--hash-password"), input="pw\n", capture_output=True, text=True,
                         timeout=60, env=env)
    assert out.returncode == 0 and verify_password("pw", out.stdout.strip())


async def test_start_is_refused_when_a_mapped_role_is_missing(fresh_dsn):
    from web.main import check_roles

    settings = web_settings.from_env({"CRONBOX_WEB_USERS": f"ops:{hash_password('pw')}:no_such_role_here"})
    pool = await db.open_pool(fresh_dsn, max_size=1, name="web-test")
    try:
        with pytest.raises(ConfigError, match="role 'no_such_role_here' does not exist"):
            await check_roles(pool, settings)
    finally:
        await pool.close()


async def test_the_schedule_page_lists_next_fires_with_its_calendars_and_runs_left(console, logins):  # noqa: F811
    client, dsn, _ = console
    with db.connect(dsn) as conn:
        conn.execute(f'SET ROLE "{logins.name("alice")}"')
        conn.execute("SELECT cronbox.create_calendar('alice-days', crons => '{\"* * * * SAT,SUN\"}', timezone => 'Europe/Berlin')")
        conn.execute("SELECT cronbox.schedule('alice-weekly', cron => '0 9 * * *', timezone => 'Europe/Berlin', "
                     "exclude => 'alice-days', max_runs => 30)")
        want = [r[0] for r in conn.execute("SELECT fire_at FROM cronbox.next_fires('alice-weekly', 10)")]
    assert len(want) == 10 and all(t.astimezone(__import__("zoneinfo").ZoneInfo("Europe/Berlin")).weekday() < 5 for t in want)
    resp = await client.get("/schedules/alice-weekly", headers=basic("alice"))
    html = await resp.text()
    assert resp.status == 200, html
    assert "alice-days" in html and "30 (30 left; 0 made)" in html
    assert html.count("not stored yet") == 10  # computed by next_fires, beyond the poller's horizon
    assert "cronbox.next_fires" in html
    # a reader may not call next_fires: the page falls back to the stored fires
    resp = await client.get("/schedules/nightly-report", headers=basic("reader"))
    assert resp.status == 200 and "not stored yet" not in await resp.text()


async def test_overview_counts_live_processes_in_words_that_agree_with_the_count(console):
    client, dsn, _ = console
    with db.connect(dsn) as su:
        su.execute("DELETE FROM cronbox.process")
        su.execute("SELECT cronbox.register_process('poller', 'poller:t:1', 't', 1, 'test')")
        su.execute("SELECT cronbox.register_process('relay', 'relay:t:2', 't', 2, 'test')")
    text = " ".join((await (await client.get("/", headers=basic("admin"))).text()).split())
    assert "live processes</a> (1 poller, 1 relay)" in text, text[:3000]
    with db.connect(dsn) as su:
        su.execute("SELECT cronbox.register_process('relay', 'relay:t:3', 't', 3, 'test')")
    text = " ".join((await (await client.get("/", headers=basic("admin"))).text()).split())
    assert "(1 poller, 2 relays)" in text, text[:3000]


async def test_an_owner_backfills_and_pauses_until_through_the_console(console, logins):  # noqa: F811
    import psycopg

    from poller.backfill import backfill_once

    client, dsn, _ = console
    token = await _form(client, "alice", "/schedules/alice-job")
    now = scalar(dsn, "SELECT date_trunc('second', now() AT TIME ZONE 'UTC')")
    form = {"csrf": token, "name": "alice-job", "from": (now - timedelta(seconds=3599)).isoformat(),  # 12 fires
            "to": now.isoformat(), "overlap": "allow"}
    resp = await client.post("/actions/backfill", data=form, headers=basic("alice"), allow_redirects=False)
    assert resp.status == 303, await resp.text()
    assert scalar(dsn, "SELECT requested_by || ' ' || overlap FROM cronbox.backfills WHERE job = 'alice-job'") \
        == f"{logins.name('alice')} allow"
    resp = await client.post("/actions/backfill", data={**form, "name": "bob-job"}, headers=basic("alice"))
    assert resp.status == 400 and "no schedule named" in await resp.text()  # row security: not hers
    assert scalar(dsn, "SELECT count(*) FROM cronbox.backfill") == 1
    async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:  # the poller's pass
        assert (await backfill_once(conn))[1] == 12
        await conn.execute("SELECT * FROM cronbox.dispatch(1000)")
    page = await (await client.get("/runs?job=alice-job", headers=basic("alice"))).text()
    assert page.count('<span class="origin origin-backfill">backfill</span>') == 12
    page = await (await client.get("/schedules/alice-job", headers=basic("alice"))).text()
    assert "<h2>Backfills</h2>" in page and "done: 12 fires backfilled" in page

    until = now + timedelta(hours=2)
    resp = await client.post("/actions/pause", data={"csrf": token, "name": "alice-job", "reason": "deploy",
                                                     "until": until.isoformat(timespec="minutes")},
                             headers=basic("alice"))
    assert resp.status == 200 and "resumes by itself at" in await resp.text()
    assert scalar(dsn, "SELECT paused_until = %s::timestamptz FROM cronbox.job WHERE name = 'alice-job'",
                  until.replace(second=0).isoformat() + "+00:00") is True
    resp = await client.post("/actions/pause", data={"csrf": token, "name": "alice-job", "reason": "x",
                                                     "until": "yesterday"}, headers=basic("alice"))
    assert resp.status == 400 and "until: expected a time" in await resp.text()


async def test_run_and_schedule_pages_show_payloads_python_cannot_load(console):
    """jsonb holds 1e400 and nesting past orjson's 1,024 levels: shown as stored, never a 500."""
    client, dsn, _ = console
    deep = '{"d": ' + "[" * 1100 + "]" * 1100 + "}"
    with db.connect(dsn) as conn:
        conn.execute("SELECT cronbox.schedule('huge-number', cron => '0 0 1 1 *', payload => '{\"x\": 1e400}')")
        conn.execute("SELECT cronbox.trigger('huge-number', payload => %s::jsonb)", (deep,))
        run_id = conn.execute("SELECT run_id FROM cronbox.runs WHERE job = 'huge-number'").fetchone()[0]
    resp = await client.get("/schedules/huge-number", headers=basic("admin"))
    assert resp.status == 200, await resp.text()
    assert "1" + "0" * 400 in await resp.text()
    resp = await client.get(f"/runs/{run_id}", headers=basic("admin"))
    assert resp.status == 200, await resp.text()
    assert "[" * 1100 in await resp.text()
