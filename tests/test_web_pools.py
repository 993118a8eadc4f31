"""The console's resource pools: the Pools page (capacity, in use, waiting, per pool the jobs
holding or waiting for units), the fires waiting to run and why (runs and schedule pages), a
job's needs linked to its pools, a run's units. In-process console, real database."""

from __future__ import annotations

import re

import pytest

from cronbox import db

from .roles import logins  # noqa: F401  (fixture)
from .web_support import basic, consoles  # noqa: F401  (fixture)


def seed_pools(dsn: str) -> dict[str, int]:
    """gpu (capacity 8): train holds 8 units, train-big waits for 8; ip (capacity 2) unused."""
    with db.connect(dsn) as conn:
        conn.execute("SELECT cronbox.set_pool('gpu', 8)")
        conn.execute("SELECT cronbox.set_pool('ip', 2)")
        conn.execute("SELECT cronbox.schedule('train', every => '1 hour', needs => '{\"gpu\": 8}')")
        conn.execute("SELECT cronbox.schedule('train-big', every => '1 hour', needs => '{\"gpu\": 8, \"ip\": 1}', "
                     "on_unavailable => 'wait', unavailable_timeout => '2 hours')")
        conn.execute("SELECT cronbox.trigger('train')")
        conn.execute("SELECT cronbox.trigger('train-big')")
        conn.execute("SELECT * FROM cronbox.dispatch(100)")
        run = conn.execute("SELECT run_id FROM cronbox.runs WHERE job = 'train' AND run_id IS NOT NULL").fetchone()[0]
        assert conn.execute("SELECT waiting_for FROM cronbox.runs WHERE job = 'train-big'").fetchone()[0] == "pool gpu"
    return {"run": run}


@pytest.fixture
async def console(consoles):  # noqa: F811
    client = await consoles()
    return client, seed_pools(consoles.dsn)


def _text(html: str) -> str:
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", html))


async def _page(client, path: str, user: str = "admin") -> str:
    resp = await client.get(path, headers=basic(user))
    assert resp.status == 200, (path, resp.status, await resp.text())
    return await resp.text()


async def test_the_pools_page_shows_capacity_use_waiting_and_who_holds_or_waits_per_pool(console):
    client, _ = console
    html = await _page(client, "/pools")
    text = _text(html)
    assert 'aria-current="page">Pools' in html
    # the table: gpu full (8 of 8, 1 waiting), ip unused
    assert re.search(r"gpu 8 8 0 8 of 8 1", text) and re.search(r"ip 2 0 2 0 of 2 0", text), text
    # per pool: train holds 8 units with one run in flight, train-big waits with 8 units per run
    gpu = text[text.index("gpu 8 of 8 units in use"):]
    assert re.search(r"train 8 1 8 0", gpu) and re.search(r"train-big 8 0 0 1", gpu), gpu
    assert 'id="pool-gpu"' in html and 'href="/schedules/train-big"' in html
    assert "No run holds units of ip" in text
    # a reader sees it too; an owner (cronbox_user) may not read cronbox.pools
    assert "train-big" in await _page(client, "/pools", "reader")
    resp = await client.get("/pools", headers=basic("alice"))
    assert resp.status == 403
    assert 'href="/pools"' not in await _page(client, "/", "alice")
    # the overview lists the pools for those who may read them
    assert "Resource pools" in await _page(client, "/")


async def test_waiting_fires_say_why_on_the_runs_schedule_and_run_pages(console):
    client, seeded = console
    runs = _text(await _page(client, "/runs"))
    assert "Waiting to run 1 fire" in runs and "train-big" in runs and "waiting for pool gpu (8 units)" in runs, runs
    # a filter on another job or queue shows none; a state filter lists runs only
    assert "Waiting to run" not in await _page(client, "/runs?job=nightly")
    assert "Waiting to run" not in await _page(client, "/runs?state=failed")
    assert "Waiting to run" in await _page(client, "/runs?job=train-big")
    html = await _page(client, "/schedules/train-big")
    text = _text(html)
    assert "waiting for pool gpu" in text and 'href="/pools#pool-gpu"' in html
    assert "Needs gpu × 8, ip × 1" in text and "when short: wait, at most 2.0 h" in text, text
    run = _text(await _page(client, f"/runs/{seeded['run']}"))
    assert "Pool units gpu × 8 (held while it runs)" in run, run
