"""A database that stored payloads nested past 2,048 levels before cronbox refused them
(cronbox.json_too_deep, at every door since): such a payload near PostgreSQL's parsing limit
failed every claim that reached its row, other queues' rows included. The upgrade sets each one
aside, with its reason, and the claims work again (docs/relay.md, "Poison data")."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import psycopg
import pytest

from cronbox import db
from cronbox.migrate import migrate

from .runs_support import T0, at

REPO = Path(__file__).resolve().parent.parent


def _nested(levels: int) -> str:
    return '{"d": ' + "[" * (levels - 1) + "]" * (levels - 1) + "}"


def _sql_before_the_bound(tmp_path: Path) -> Path:
    added = subprocess.run(["git", "-C", str(REPO), "log", "--format=%H", "--diff-filter=A", "-1", "--",
                            "sql/functions/internal/json_too_deep.sql"], capture_output=True, text=True)
    if added.returncode != 0 or not added.stdout.strip():
        pytest.skip("needs the git history of this repository")
    archive = subprocess.run(["git", "-C", str(REPO), "archive", added.stdout.strip() + "^", "sql"],
                             capture_output=True, check=True)
    subprocess.run(["tar", "-x", "-C", str(tmp_path)], input=archive.stdout, check=True)
    return tmp_path / "sql"


def _deepest_storable(conn: psycopg.Connection) -> int:
    """The deepest payload the old schedule() stores (PostgreSQL's parser limit at this
    max_stack_depth, ~14,550 levels at 2 MB): a claim copying it into a message needs more
    stack than that parse did."""
    low, high = 2048, 20_000  # stored, refused
    while high - low > 1:
        mid = (low + high) // 2
        try:
            with conn.transaction():
                conn.execute("SELECT cronbox.schedule_at('probe', every => '1 hour', payload => %s::jsonb, "
                             "p_now => %s)", (_nested(mid), T0))
                raise _Stored
        except _Stored:
            low = mid
        except psycopg.errors.StatementTooComplex:
            high = mid
    return low


class _Stored(Exception):
    pass


@pytest.fixture
def stored_before(pg, tmp_path: Path) -> Iterator[str]:
    """A database of the release before the bound, holding: `deep` (a job whose own payload is
    too deep) with a run dispatched, not delivered; `plain`, two of whose manual fires carry a
    too-deep payload, one dispatched, one not yet due; `canary` on a queue of its own with a run
    waiting; `shallow`, a job with a 2,048-level payload (within the bound), with one too."""
    name = f"cronbox_deep{os.getpid()}"
    dsn = pg.create_db(name)
    try:
        migrate(dsn, _sql_before_the_bound(tmp_path))
        with db.connect(dsn) as conn:
            deep = _nested(_deepest_storable(conn))
            for job, extra, payload in (("deep", "", deep), ("plain", "", "{}"),
                                        ("canary", ", queue => 'canary'", "{}"),
                                        ("shallow", "", _nested(2048))):
                conn.execute(f"SELECT cronbox.schedule_at(%s, every => '1 hour'{extra}, payload => %s::jsonb, "
                             "p_now => %s)", (job, payload, T0 - timedelta(days=1)))
            for job, payload in (("deep", None), ("canary", None), ("shallow", None), ("plain", deep)):
                conn.execute("INSERT INTO cronbox.job_future (job_id, bucket, fire_at, due_at, priority, origin, queue, "
                             "payload) SELECT job_id, bucket, %s, %s, priority, %s, queue, %s::jsonb FROM cronbox.job "
                             "WHERE name = %s", (at(0), at(0), "schedule" if payload is None else "manual",
                                                  payload, job))
            conn.execute("SELECT cronbox.dispatch_at(1000, p_now => %s)", (at(0),))
            conn.execute("INSERT INTO cronbox.job_future (job_id, bucket, fire_at, due_at, priority, origin, queue, "
                         "payload) SELECT job_id, bucket, %s, %s, priority, 'manual', queue, %s::jsonb FROM cronbox.job "
                         "WHERE name = 'plain'", (at(60), at(60), deep))
        yield dsn
    finally:
        pg.drop_db(name)


def _claim(conn: psycopg.Connection) -> list[str]:
    return sorted(r[0] for r in conn.execute(
        "SELECT o.job_name FROM cronbox.claim_outbox_at('relay-a', 100, p_now => %s) c "
        "JOIN cronbox.outbox o ON o.outbox_id = c.outbox_id WHERE c.kind = 'run'", (at(1),)))


def test_the_release_before_the_bound_jams_every_claim_on_a_deep_payload(stored_before):
    # What the upgrade repairs: the canary's run on its own queue is not claimed either.
    with db.connect(stored_before) as conn:
        with pytest.raises(psycopg.errors.StatementTooComplex):
            conn.execute("SELECT count(*) FROM cronbox.claim_outbox_at('relay-a', 100, p_now => %s)", (at(1),))


def test_the_upgrade_sets_aside_what_was_stored_too_deep_and_the_claims_work_again(stored_before):
    migrate(stored_before)
    with db.connect(stored_before) as conn:
        jobs = {r[0]: r[1:] for r in conn.execute("SELECT name, paused, paused_reason FROM cronbox.job")}
        assert jobs["canary"] == (False, None) and jobs["shallow"] == (False, None)
        for name in ("deep", "plain"):
            paused, reason = jobs[name]
            assert paused and reason.startswith("quarantined: ") and "2,048 levels" in reason, (name, reason)
        assert "its own payload" in jobs["deep"][1] and "1 run in flight (cancelled)" in jobs["deep"][1]
        assert "1 run in flight (cancelled)" in jobs["plain"][1] and "1 fire not yet dispatched (dropped)" in jobs["plain"][1]
        # the deep job's run never delivered: ended, its message withdrawn; nothing too deep left
        for name in ("deep", "plain"):
            assert conn.execute("SELECT state FROM cronbox.runs WHERE job = %s", (name,)).fetchall() == [
                ("cancelled",)]
        assert conn.execute(
            "SELECT (SELECT count(*) FROM cronbox.outbox WHERE jsonb_path_exists(payload, 'strict $.**{2048}'))"
            " + (SELECT count(*) FROM cronbox.job_future WHERE jsonb_path_exists(payload, 'strict $.**{2048}'))"
        ).fetchone()[0] == 0
        assert conn.execute("SELECT action FROM cronbox.schedule_changes WHERE job = 'plain' "
                            "ORDER BY change_id DESC LIMIT 1").fetchone()[0] == "quarantined"
        # every other run is claimed, the canary's and the 2,048-level one's included
        assert _claim(conn) == ["canary", "shallow"]
