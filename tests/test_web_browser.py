"""The console in a real browser: Debian's chromium driven by Playwright, against the real
`cronbox web` process and a real database. One browser for the module. (The docs'
screenshots are made by `python -m bench.screenshots`.)"""

from __future__ import annotations

import hashlib
import hmac
import os
import urllib.request
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from cronbox import db
from cronbox.pgcluster import free_port

from .conftest import TEMPLATE
from .procs import Proc, wait_until
from .roles import logins  # noqa: F401  (fixture)
from .web_support import PASSWORD, scalar, seed, users_env

playwright_api = pytest.importorskip("playwright.sync_api")
CHROMIUM = "/usr/bin/chromium"
ARGS = ["--no-sandbox", "--headless=new", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--no-first-run"]
SECRET = "browser-test-secret-0123456789abcdef"
pytestmark = pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="chromium not installed (.ci/run installs it)")


@pytest.fixture(scope="module")
def site(pg, template_dsn, logins, tmp_path_factory) -> Iterator[dict[str, Any]]:  # noqa: F811
    name = f"cronbox_web_{os.getpid()}"
    pg.drop_db(name)
    dsn = pg.create_db(name, template=TEMPLATE)
    data = seed(dsn, logins)
    port = free_port()
    proc = Proc("web", dsn, tmp_path_factory.mktemp("web"), _args=f"--port {port}",
                CRONBOX_WEB_USERS=users_env(logins), CRONBOX_WEB_SECRET=SECRET, CRONBOX_WEB_REFRESH="1")
    base = f"http://127.0.0.1:{port}"

    def healthy() -> bool:
        assert proc.popen.poll() is None, proc.output
        try:
            return urllib.request.urlopen(f"{base}/healthz", timeout=2).status == 200
        except OSError:
            return False

    wait_until(healthy, timeout=30, what="cronbox web to answer /healthz")
    try:
        yield {"base": base, "dsn": dsn, **data}
    finally:
        assert proc.terminate() == 0, proc.output
        pg.drop_db(name)


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with playwright_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        try:
            yield b
        finally:
            b.close()


class Tab:
    """A page logged in as one console user, recording console errors and failed requests."""

    def __init__(self, browser: Any, base: str, user: str, **opts: Any):
        self.base = base
        self.ctx = browser.new_context(http_credentials={"username": user, "password": PASSWORD},
                                       viewport={"width": 1280, "height": 860}, **opts)
        self.page = self.ctx.new_page()
        self.errors: list[str] = []
        self.page.on("console", lambda m: self.errors.append(f"console {m.type}: {m.text}")
                     if m.type in ("error", "warning") else None)
        self.page.on("pageerror", lambda e: self.errors.append(f"page error: {e}"))
        # a live refresh in flight when the test navigates away is aborted: not an error
        self.page.on("requestfailed", lambda r: self.errors.append(f"request failed: {r.url} {r.failure}")
                     if r.failure != "net::ERR_ABORTED" else None)

    def go(self, path: str) -> Any:
        resp = self.page.goto(self.base + path)
        assert resp is not None and resp.status == 200, (path, resp and resp.status)
        return resp

    def close(self) -> None:
        self.ctx.close()


@pytest.fixture
def admin(browser, site) -> Iterator[Tab]:
    tab = Tab(browser, site["base"], "admin")
    yield tab
    tab.close()


def test_every_page_loads_without_console_errors(browser, site, admin):
    run_id = site["runs"]["nightly-report"]
    pages = {"overview": "/", "schedules": "/schedules", "schedule": "/schedules/nightly-report",
             "runs": "/runs", "run": f"/runs/{run_id}", "dead-letters": "/dead-letters", "processes": "/processes",
             "runs-filtered": "/runs?state=failed&queue=default&since=2020-01-01T00%3A00",
             "schedules-search": "/schedules?q=report", "after-job": "/schedules/after-report"}
    for name, path in pages.items():
        admin.go(path)
        assert admin.page.locator("main h1").count() == 1, name
    # live refresh (1 s here) swaps the page in place without errors
    admin.go("/")
    admin.page.evaluate("document.getElementById('content').setAttribute('data-old', '1')")
    admin.page.locator("#content[data-old]").wait_for(state="detached", timeout=10_000)
    assert admin.page.locator("#content").count() == 1
    assert admin.errors == []
    # and every page reads the same with JavaScript off
    nojs = Tab(browser, site["base"], "admin", java_script_enabled=False)
    try:
        for path in pages.values():
            nojs.go(path)
            assert nojs.page.locator("main h1").count() == 1, path
        assert nojs.page.locator("label.live").is_hidden()  # the live toggle only exists with JS
    finally:
        nojs.close()
    # an owner (cronbox_user): its own pages load too; no queue or process views for it
    owner = Tab(browser, site["base"], "alice")
    try:
        for path in ("/", "/schedules", "/schedules?q=job", "/runs", "/runs?state=failed"):
            owner.go(path)
            assert owner.page.locator("main h1").count() == 1, path
        assert owner.page.locator("a[href='/processes']").count() == 0
        assert owner.errors == []
    finally:
        owner.close()


def _changes(dsn: str, job: str, action: str) -> list[tuple[str, str]]:
    with db.connect(dsn) as conn:
        return conn.execute("SELECT reason, changed_by FROM cronbox.schedule_changes WHERE job = %s AND action = %s "
                            "ORDER BY change_id", (job, action)).fetchall()


def test_pause_resume_and_trigger_through_the_ui(site, admin, logins):  # noqa: F811
    dsn, page = site["dsn"], admin.page
    admin.go("/schedules/bob-job")
    page.fill("form[action='/actions/pause'] input[name=reason]", "disk full on <b>host</b>")
    page.click("form[action='/actions/pause'] button")
    page.wait_for_selector("text=Paused")
    assert scalar(dsn, "SELECT paused FROM cronbox.job WHERE name = 'bob-job'") is True
    assert _changes(dsn, "bob-job", "paused") == [("disk full on <b>host</b> (web: admin)", logins.name("admin"))]
    assert page.locator("main b").count() == 0  # the reason is shown as text, not markup
    page.click("form[action='/actions/resume'] button")
    page.wait_for_selector("form[action='/actions/pause']")
    assert scalar(dsn, "SELECT paused FROM cronbox.job WHERE name = 'bob-job'") is False
    assert [r[1] for r in _changes(dsn, "bob-job", "resumed")] == [logins.name("admin")]
    page.fill("form[action='/actions/trigger'] input[name=payload]", '{"from": "ui"}')
    page.click("form[action='/actions/trigger'] button")
    page.wait_for_selector("text=triggered")
    # trigger() decides the fire at once (dispatch's write): the run carries the payload
    assert scalar(dsn, "SELECT r.payload FROM cronbox.run r JOIN cronbox.job j USING (job_id) "
                       "WHERE j.name = 'bob-job' AND r.origin = 'manual'") == {"from": "ui"}
    assert [r[1] for r in _changes(dsn, "bob-job", "triggered")] == [logins.name("admin")]
    assert admin.errors == []


def test_pause_until_and_backfill_through_the_ui(site, admin, logins):  # noqa: F811
    dsn, page = site["dsn"], admin.page
    now = scalar(dsn, "SELECT date_trunc('second', now() AT TIME ZONE 'UTC')")
    admin.go("/schedules/nightly-report")
    page.fill("form[action='/actions/backfill'] input[name=from]", (now - timedelta(days=3)).isoformat())
    page.fill("form[action='/actions/backfill'] input[name=to]", now.isoformat())
    page.select_option("form[action='/actions/backfill'] select[name=overlap]", "allow")
    page.click("form[action='/actions/backfill'] button")
    page.wait_for_selector("text=requested")
    assert page.locator("table.backfills tbody tr").count() == 1
    assert scalar(dsn, "SELECT overlap || ' ' || requested_by FROM cronbox.backfills") == f"allow {logins.name('admin')}"
    until = now + timedelta(days=1)
    admin.go("/schedules/alice-job")
    page.fill("form[action='/actions/pause'] input[name=reason]", "until tomorrow")
    page.fill("form[action='/actions/pause'] input[name=until]", until.isoformat())
    page.click("form[action='/actions/pause'] button")
    page.wait_for_selector(".paused-until")
    assert scalar(dsn, "SELECT paused_until = %s::timestamptz FROM cronbox.job WHERE name = 'alice-job'",
                  until.isoformat() + "+00:00") is True
    page.click("form[action='/actions/resume'] button")
    page.wait_for_selector("form[action='/actions/pause']")
    assert admin.errors == []


def test_cancel_a_run_and_redrive_through_the_ui(site, admin):
    dsn, page = site["dsn"], admin.page
    run_id = site["runs"]["nightly-report"]
    admin.go(f"/runs/{run_id}")
    page.click("form[action='/actions/cancel'] button")
    page.wait_for_selector("text=Yes, go ahead")  # the confirmation step
    assert scalar(dsn, "SELECT cancel_requested OR state = 'cancelled' FROM cronbox.runs WHERE run_id = %s", run_id) is False
    page.click("text=Yes, go ahead")
    page.wait_for_selector("text=cancel:")
    assert scalar(dsn, "SELECT cancel_requested OR state = 'cancelled' FROM cronbox.runs WHERE run_id = %s", run_id) is True
    admin.go("/dead-letters")
    page.click(f"tr:has-text('HTTP 410') form[action='/actions/redrive'] button")
    page.wait_for_selector("text=redriven: 1")
    assert scalar(dsn, "SELECT count(*) FROM cronbox.dead_letters") == 0
    assert scalar(dsn, "SELECT count(*) FROM cronbox.outbox WHERE last_error LIKE 'redriven after%%'") == 1
    assert admin.errors == []


def test_a_reader_sees_no_buttons_and_forged_or_csrf_less_posts_fail(browser, site, admin):
    dsn = site["dsn"]
    reader = Tab(browser, site["base"], "reader")
    try:
        for path in ("/schedules/nightly-report", "/dead-letters", f"/runs/{site['runs']['nightly-report']}"):
            reader.go(path)
            assert reader.page.locator("form[method=post]").count() == 0, path
        cookie = next(c["value"] for c in reader.ctx.cookies() if c["name"] == "cronbox_csrf")
        token = hmac.new(SECRET.encode(), f"{cookie}:reader".encode(), hashlib.sha256).hexdigest()
        resp = reader.ctx.request.post(site["base"] + "/actions/pause",
                                       form={"csrf": token, "name": "nightly-report", "reason": "forged"})
        assert resp.status == 403 and "permission denied" in resp.text()
    finally:
        reader.close()
    admin.go("/schedules/nightly-report")
    resp = admin.ctx.request.post(site["base"] + "/actions/pause", form={"name": "nightly-report", "reason": "no csrf"})
    assert resp.status == 403 and "Cross-site request check failed" in resp.text()
    assert scalar(dsn, "SELECT paused FROM cronbox.job WHERE name = 'nightly-report'") is False
    assert _changes(dsn, "nightly-report", "paused") == []
