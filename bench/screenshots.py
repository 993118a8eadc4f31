"""bench/screenshots: the console's screenshots in docs/img, made again from scratch.

Starts a private PostgreSQL (not durable: nothing here is measured), migrates, schedules a
few jobs with dependencies, three hours of generated history (for the chart), a failed run,
a dead letter and two registered processes, does what the poller does for the console (one
saturation pass for the next fires; the name search sync and per-minute counts of its
maintenance), starts a real `cronbox web` with one login
(`admin` -> cronbox_admin) and saves a PNG of each main page, taken by Debian's chromium
driven by Playwright (nothing downloads a browser: `apt-get install chromium`).

  python -m bench.screenshots                  # writes docs/img/web-*.png
  python -m bench.screenshots --out /tmp/shots --chromium /usr/bin/chromium
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import urllib.request
from pathlib import Path
from typing import Any

import psycopg

from bench.common import REPO, Database, Fleet, log, wait_until, workdir
from bench.web import fill_history
from cronbox.pgcluster import free_port
from web.auth import hash_password

PASSWORD = "screenshots"
PAGES = {  # file name -> path ({run} is the failed run)
    "overview": "/",
    "schedules": "/schedules",
    "schedule": "/schedules/nightly-report",
    "runs": "/runs",
    "run": "/runs/{run}",  # a failed manual run of warehouse-load
    "dead-letters": "/dead-letters",
}
DARK = {"overview-dark": "/"}  # the same page under prefers-color-scheme: dark
PHONE = {"schedule-phone": "/schedules/nightly-report"}  # 390 px wide
ARGS = ["--no-sandbox", "--headless=new", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--no-first-run"]


async def _saturate(dsn: str) -> None:
    """The poller's saturation pass, so the schedule page shows its next fires."""
    from datetime import timedelta

    from cronbox import db
    from poller.saturate import saturate_once

    async with await db.aconnect(dsn) as conn:
        await saturate_once(conn, batch=1000, horizon=timedelta(days=2), grace=timedelta(seconds=1))


def seed(conn: psycopg.Connection) -> dict[str, Any]:
    """Jobs, dependencies, history, a failed run, a dead letter, processes; returns the failed run."""
    for name, opts in (
        ("nightly-report", "cron => '30 2 * * *', timezone => 'Europe/Berlin', queue => 'reports'"),
        ("invoice-sync", "every => '5 minutes', queue => 'billing'"),
        ("warehouse-load", "cron => '0 * * * *', queue => 'etl'"),
        ("cleanup-tmp", "cron => '*/15 * * * *', queue => 'default'"),
        ("send-digest", "after => ARRAY['nightly-report', 'warehouse-load'], queue => 'mail'"),
        ("archive-digest", "after => ARRAY['send-digest'], queue => 'default'"),
    ):
        conn.execute(f"SELECT cronbox.schedule('{name}', {opts})")
    conn.execute("SELECT cronbox.add_dependency('nightly-report', 'warehouse-load', within => '1 day')")
    conn.execute("SELECT cronbox.pause('cleanup-tmp', 'disk maintenance until Friday')")
    conn.execute("SELECT cronbox.schedule('legacy-export', cron => '0 4 * * *', queue => 'etl')")
    conn.execute("SELECT cronbox.quarantine_job(job_id, 'cron: no fire time can be computed for this schedule') "
                 "FROM cronbox.job WHERE name = 'legacy-export'")
    fill_history(conn, jobs=["nightly-report", "invoice-sync", "warehouse-load", "cleanup-tmp"], runs=4000, hours=3)
    conn.execute("SELECT cronbox.trigger('warehouse-load', payload => '{\"tables\": [\"orders\", \"stock\"]}')")
    conn.execute("SELECT * FROM cronbox.dispatch(1000)")
    run_id = conn.execute("SELECT max(run_id) FROM cronbox.runs WHERE job = 'warehouse-load' AND origin = 'manual'"
                          ).fetchone()[0]
    conn.execute("SELECT cronbox.start_run(%s, 'worker-2')", (run_id,))
    conn.execute("SELECT cronbox.fail_run(%s, 'upstream API answered 503 Service Unavailable', false)", (run_id,))
    conn.execute("""
        INSERT INTO cronbox.dead_letter (outbox_id, run_id, queue, kind, message, timeout, created_at, attempts,
                                         last_error)
        VALUES (1, NULL, 'billing', 'run', '{"job": "invoice-sync"}', '5 minutes', now() - interval '20 minutes',
                10, 'HTTP 410 Gone from https://billing.internal/hooks/cronbox')""")
    for kind in ("poller", "relay"):
        conn.execute("SELECT cronbox.register_process(%s, %s, 'app-1', 4242, 'dev')", (kind, f"{kind}-app-1"))
    conn.execute("""UPDATE cronbox.process SET info = '{"breakers": {"billing": {"state": "open",
                    "consecutive_failures": 12, "probe_every_s": 30}}}' WHERE name = 'relay-app-1'""")
    conn.execute("SELECT cronbox.sync_schedule_names()")
    while conn.execute("SELECT cronbox.tally_runs_at(100000, clock_timestamp() + interval '1 minute')"
                       ).fetchone()[0] == 100000:
        pass
    return {"run": run_id}


def shoot(base: str, out: Path, chromium: str, data: dict[str, Any]) -> list[Path]:
    from playwright.sync_api import sync_playwright

    out.mkdir(parents=True, exist_ok=True)
    saved: list[Path] = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, args=ARGS)
        try:
            ctx = browser.new_context(http_credentials={"username": "admin", "password": PASSWORD},
                                      viewport={"width": 1280, "height": 860})
            page = ctx.new_page()
            errors: list[str] = []
            page.on("console", lambda m: errors.append(m.text) if m.type in ("error", "warning") else None)
            page.on("pageerror", lambda e: errors.append(str(e)))
            dark = browser.new_context(http_credentials={"username": "admin", "password": PASSWORD},
                                       viewport={"width": 1280, "height": 860}, color_scheme="dark")
            phone = browser.new_context(http_credentials={"username": "admin", "password": PASSWORD},
                                        viewport={"width": 390, "height": 844}, is_mobile=True)
            for pages, tab in ((PAGES, page), (DARK, dark.new_page()), (PHONE, phone.new_page())):
                for name, path in pages.items():
                    resp = tab.goto(base + path.format(**data))
                    if resp is None or resp.status != 200:
                        raise RuntimeError(f"{path}: HTTP {resp and resp.status}")
                    target = out / f"web-{name}.png"
                    tab.screenshot(path=str(target))
                    saved.append(target)
                    log(f"  {target}")
            if errors:
                raise RuntimeError(f"console errors in the browser: {errors}")
        finally:
            browser.close()
    return saved


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.screenshots", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", default=str(REPO / "docs" / "img"), help="folder for web-*.png (default docs/img)")
    p.add_argument("--chromium", default="/usr/bin/chromium")
    args = p.parse_args(argv)
    if not Path(args.chromium).exists():
        p.error(f"{args.chromium} not found: apt-get install chromium")
    db_args = argparse.Namespace(dsn=None, fast=True, keep=False)
    with Database(db_args, "screenshots") as database, workdir("screenshots") as logdir:
        with database.connect() as conn:
            data = seed(conn)
        asyncio.run(_saturate(database.dsn))
        port = free_port()
        users = f"admin:{hash_password(PASSWORD)}:cronbox_admin"
        with Fleet(logdir) as fleet:
            web = fleet.cronbox("web", database.dsn, {"CRONBOX_WEB_PORT": str(port), "CRONBOX_WEB_USERS": users})
            base = f"http://127.0.0.1:{port}"

            def up() -> bool:
                if not web.alive():
                    raise RuntimeError(web.tail())
                try:
                    return urllib.request.urlopen(base + "/healthz", timeout=2).status == 200
                except OSError:
                    return False

            wait_until(up, 120, "cronbox web")  # Python start-up alone takes tens of seconds on a loaded machine
            shoot(base, Path(args.out), args.chromium, data)
    return 0


if __name__ == "__main__":
    sys.exit(main())
