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
from .web_support import PASSWORD, scalar, seed, seed_console_cases, users_env

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
        opts.setdefault("viewport", {"width": 1280, "height": 860})
        self.ctx = browser.new_context(http_credentials={"username": user, "password": PASSWORD}, **opts)
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


@pytest.mark.slow
def test_every_page_loads_without_console_errors(browser, site, admin):
    run_id = site["runs"]["nightly-report"]
    pages = {"overview": "/", "schedules": "/schedules", "schedule": "/schedules/nightly-report",
             "runs": "/runs", "run": f"/runs/{run_id}", "dead-letters": "/dead-letters", "processes": "/processes",
             "pools": "/pools",
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
    assert scalar(dsn, "SELECT r.payload FROM cronbox.runs r JOIN cronbox.job j USING (job_id) "
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


@pytest.fixture(scope="module")
def cases(site) -> dict[str, Any]:
    return seed_console_cases(site["dsn"])


PAGES = ("/", "/schedules", "/schedules/nightly-report", "/schedules/wide-payload", "/schedules/broken-job",
         "/runs", "/dead-letters", "/processes", "/pools", "/schedules/gpu-eval", "/schedules?status=quarantined", "/runs?state=failed&state=lost")


def _relay_alive(dsn: str) -> None:
    """The test relay's heartbeat (it reports the open breaker while it is live)."""
    scalar(dsn, "UPDATE cronbox.process SET last_seen = now() WHERE name = 'relay:test:9' RETURNING 1")


def test_quarantine_and_open_breakers_are_visible_and_one_click_resumes(site, cases, admin):
    page = admin.page
    _relay_alive(site["dsn"])
    admin.go("/")
    card = page.locator(".card", has_text="quarantined")
    assert card.locator(".big").inner_text() == "1"
    assert page.locator(".card", has_text="open circuit breaker").locator(".big").inner_text() == "1"
    assert page.locator("table.breakers", has_text="flaky-q").count() == 1
    card.locator("a").click()
    page.wait_for_url("**/schedules?status=quarantined")
    assert page.locator("table.schedules tbody tr").count() == 1
    assert page.locator("table.schedules .state-quarantined").inner_text() == "quarantined"
    page.click("table.schedules a:text('broken-job')")
    assert "cannot compute the next fire (<boom>)" in page.locator(".quarantine pre").inner_text()
    page.click("form[action='/actions/resume'] button:text('Resume after the fix')")
    page.wait_for_selector("text=resumed")
    assert scalar(site["dsn"], "SELECT paused FROM cronbox.job WHERE name = 'broken-job'") is False
    _relay_alive(site["dsn"])
    admin.go("/processes")
    assert page.locator("#breakers + div table", has_text="flaky-q").locator(".state-breaker-open").count() == 1
    assert admin.errors == []


def test_failures_link_and_run_filters_match_what_they_say(site, admin):
    page = admin.page
    admin.go("/")
    page.click(".card a:text('failures')")
    query = page.url.split("?", 1)[1]
    assert "state=failed" in query and "state=lost" in query and "since=" in query
    assert page.locator("table.runs tbody", has_text="alice-job").count() == 1
    # a job filter is a substring; several states at once; the schedules list filters by status
    admin.go("/runs?job=LICE&state=failed&state=succeeded")
    assert page.locator("table.runs tbody tr", has_text="alice-job").count() >= 1
    assert page.locator("table.runs tbody tr", has_text="nightly-report").count() == 0
    assert page.locator("fieldset.states input[value=failed]").is_checked()
    admin.go("/runs?order=duration")
    assert page.locator("select[name=order]").input_value() == "duration"
    admin.go("/schedules?status=paused")
    assert page.locator("table.schedules tbody tr", has_text="nightly-report").count() == 0
    assert admin.errors == []


def test_live_refresh_keeps_a_filter_being_typed(site, admin):
    page = admin.page
    admin.go("/runs")
    page.fill("input[name=job]", "half-typed")
    page.locator("h1").click()  # the field loses focus, the text is not submitted
    page.evaluate("document.getElementById('content').setAttribute('data-old', '1')")
    page.wait_for_timeout(2500)  # two refresh intervals (1 s here) would have swapped the page
    assert page.locator("#content[data-old]").count() == 1
    assert page.input_value("input[name=job]") == "half-typed"


def test_names_that_look_like_paths_link_to_their_own_page(site, cases, admin):
    page = admin.page
    for name in ("a/../b", ".."):
        admin.go("/schedules?q=" + ("a/" if name != ".." else ".."))
        page.locator("table.schedules a", has_text=name).first.click()
        page.wait_for_load_state()
        assert page.locator("main h1").inner_text().startswith(f"Schedule {name} "), (name, page.url)


def test_bad_filters_refused_actions_and_messages(site, admin):
    page = admin.page
    resp = page.goto(site["base"] + "/runs?state=bogus")
    assert resp.status == 400 and "text/html" in resp.headers["content-type"]
    assert page.locator("header nav a[href='/runs']").count() == 1 and "state" in page.locator(".flash").inner_text()
    # a refused backfill shows the schedule again, with the error and what was typed (UTC, ISO)
    admin.go("/schedules/nightly-report")
    form = page.locator("form[action='/actions/backfill']")
    assert form.locator("input[name=from]").get_attribute("placeholder").startswith("20")
    form.locator("input[name=from]").fill("2026-01-02 00:00")
    form.locator("input[name=to]").fill("2026-01-01 00:00")
    form.locator("button").click()
    page.wait_for_selector(".flash.bad")
    assert "backfill" in page.locator(".flash.bad").inner_text()
    assert page.input_value("form[action='/actions/backfill'] input[name=from]") == "2026-01-02 00:00"
    # a link cannot make the console say something; what an action did shows once
    admin.go("/?msg=the+console+was+hacked")
    assert "hacked" not in page.content()
    admin.go("/schedules/bob-job")
    page.fill("form[action='/actions/pause'] input[name=reason]", "flash test")
    page.click("form[action='/actions/pause'] button")
    page.wait_for_selector("p.flash[role=status]:text('paused')")
    page.reload()
    assert page.locator("p.flash[role=status]").count() == 0
    page.click("form[action='/actions/resume'] button")
    page.wait_for_selector("form[action='/actions/pause']")


def test_pages_fit_390_px_and_the_payload_stays_in_its_column(browser, site, cases):
    phone = Tab(browser, site["base"], "admin", viewport={"width": 390, "height": 844}, is_mobile=True)
    wide = Tab(browser, site["base"], "admin")
    try:
        for path in PAGES:
            phone.go(path)
            width = phone.page.evaluate("document.documentElement.scrollWidth")
            assert width <= 390, (path, width)
        wide.go("/schedules/wide-payload")
        pre = wide.page.locator("dd pre.json").bounding_box()
        column = wide.page.locator(".cols > section").first.bounding_box()
        fires = wide.page.locator(".cols > section").nth(1).bounding_box()
        assert pre["x"] + pre["width"] <= column["x"] + column["width"] + 1 <= fires["x"], (pre, column, fires)
    finally:
        phone.close()
        wide.close()


def test_rerun_a_run_and_delete_a_dead_letter_through_the_ui(site, admin):
    dsn, page = site["dsn"], admin.page
    failed = site["runs"]["alice-job"]
    admin.go(f"/runs/{failed}")
    page.click("form[action='/actions/rerun'] button")
    page.wait_for_selector("text=re-run of run")
    new = int(page.url.rsplit("/", 1)[1])
    assert new != failed and scalar(dsn, "SELECT origin FROM cronbox.runs WHERE run_id = %s", new) == "rerun"
    assert scalar(dsn, "SELECT count(*) FROM cronbox.schedule_changes WHERE action = 'rerun'") == 1
    dead = scalar(dsn, "INSERT INTO cronbox.dead_letter (outbox_id, run_id, queue, kind, message, timeout, created_at, "
                       "attempts, last_error) VALUES (2, NULL, 'default', 'notification', '{}', '5 minutes', now(), 5, "
                       "'HTTP 404 gone') RETURNING dead_letter_id")
    admin.go("/dead-letters")
    page.click("tr:has-text('HTTP 404 gone') form[action='/actions/delete-dead-letter'] button")
    page.click("text=Yes, go ahead")
    page.wait_for_selector(f"text=dead letter {dead} deleted")
    assert scalar(dsn, "SELECT count(*) FROM cronbox.dead_letters WHERE dead_letter_id = %s", dead) == 0
    assert admin.errors == []


def test_strips_graph_relative_times_and_dark_theme(browser, site, cases):
    tab = Tab(browser, site["base"], "admin", color_scheme="dark")
    try:
        tab.go("/schedules")
        assert tab.page.locator("table.schedules tr:has-text('alice-job') .strip .cell").count() >= 1
        tab.go("/schedules/after-report")
        node = tab.page.locator("svg.graph a[aria-label^='nightly-report']")
        assert "last run" in node.get_attribute("aria-label")
        tab.go(f"/runs/{site['runs']['alice-job']}")
        assert tab.page.locator(".ago", has_text="ago").count() >= 1
        background = tab.page.evaluate("getComputedStyle(document.body).backgroundColor")
        assert sum(int(c) for c in background[background.index("(") + 1:-1].split(",")[:3]) < 150, background
        assert tab.errors == []
    finally:
        tab.close()


AXE = Path(__file__).parent / ".axe" / "node_modules" / "axe-core" / "axe.min.js"


@pytest.mark.slow
@pytest.mark.skipif(not AXE.exists(), reason="axe-core not installed (.ci/run installs it with npm)")
def test_axe_finds_nothing_serious_on_any_page_the_crawl_reaches(browser, site, cases):
    """Every kind of page the links reach (one of each: path with its numbers and names
    folded, and which query fields it has); in the dark theme, the main pages."""
    import re
    from urllib.parse import parse_qs, urlsplit

    def kind(href: str) -> str:
        parts = urlsplit(href)
        path = re.sub(r"^/schedules/.+", "/schedules/NAME", re.sub(r"\d+", "N", parts.path))
        return path + "?" + ",".join(sorted(parse_qs(parts.query)))

    found: list[str] = []
    for scheme, start in (("light", ["/", "/pools"]), ("dark", ["/", "/schedules/broken-job", "/runs", "/pools"])):
        tab = Tab(browser, site["base"], "admin", bypass_csp=True, color_scheme=scheme)  # to inject axe
        seen: dict[str, str] = {}
        todo = list(start)
        try:
            while todo:
                path = todo.pop(0)
                if kind(path) in seen:
                    continue
                seen[kind(path)] = path
                tab.go(path)
                tab.page.add_script_tag(path=str(AXE))
                result = tab.page.evaluate("axe.run(document, {resultTypes: ['violations']})")
                for v in result["violations"]:
                    if v["impact"] in ("serious", "critical"):
                        found.append(f"{scheme} {path}: {v['id']} ({v['impact']}): {[n['target'] for n in v['nodes']][:3]}")
                if scheme == "light":
                    todo += [h.split("#")[0] for h in tab.page.eval_on_selector_all(
                        "a[href^='/']", "els => els.map(e => e.getAttribute('href'))") if not h.startswith("/static/")]
        finally:
            tab.close()
        assert len(seen) >= (10 if scheme == "light" else 4), sorted(seen)
        assert "/pools?" in seen, sorted(seen)
    assert found == [], "\n".join(found)


def test_pools_page_links_jobs_and_waiting_fires_both_ways(site, cases, admin):
    admin.go("/pools")
    page = admin.page
    assert page.locator("table.pools meter").first.get_attribute("value") == "4"
    gpu = page.locator("section.pool", has=page.locator("h2#pool-gpu"))
    assert gpu.locator("tr", has_text="gpu-train").locator("td").all_inner_texts()[1:] == ["4", "1", "4", "0"]
    assert gpu.locator("tr", has_text="gpu-eval").locator("td").all_inner_texts()[1:] == ["4", "0", "0", "1"]
    gpu.locator("a", has_text="gpu-eval").click()
    page.wait_for_url("**/schedules/gpu-eval")
    assert "waiting for pool gpu (4 units)" in page.locator("section.waiting").inner_text()
    page.locator("dd.needs a", has_text="gpu").click()
    page.wait_for_url("**/pools#pool-gpu")
    assert page.locator("h2#pool-gpu").is_visible()
    assert admin.errors == []
