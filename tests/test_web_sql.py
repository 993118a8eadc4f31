"""The SQL functions behind the console's re-run, dead-letter delete and dependency graph:
each callable from psql first, with its own grant, bounds and row security."""

from __future__ import annotations

import psycopg
import pytest

from cronbox import db

from .roles import logins  # noqa: F401  (fixture)
from .web_support import seed


def _err(conn: psycopg.Connection, statement: str, *params: object) -> tuple[str, str]:
    with pytest.raises(psycopg.Error) as exc:
        conn.execute(statement, params)
    conn.rollback()
    return exc.value.sqlstate or "", str(exc.value).splitlines()[0]


def test_rerun_repeats_a_finished_run_with_its_payload_as_a_new_run(fresh_dsn, logins):  # noqa: F811
    data = seed(fresh_dsn, logins)
    failed = data["runs"]["alice-job"]
    with db.connect(fresh_dsn) as su:
        su.execute("UPDATE cronbox.run SET payload = '{\"n\": 1e400}' WHERE run_id = %s", (failed,))
        su.execute("SELECT cronbox.pause('alice-job', 'maintenance')")
    with logins.connect(fresh_dsn, "alice") as alice:
        new = alice.execute("SELECT cronbox.rerun(%s, reason => 'fixed the disk')", (failed,)).fetchone()[0]
        # the job's overlap policy decides as for any fire: the first re-run is still in flight
        again = alice.execute("SELECT cronbox.rerun(%s)", (failed,)).fetchone()[0]
        assert alice.execute("SELECT state, origin FROM cronbox.runs WHERE run_id = %s", (again,)).fetchone() \
            == ("skipped", "rerun")
        # another's run is not hers to see; bad arguments
        assert _err(alice, "SELECT cronbox.rerun(%s)", data["runs"]["nightly-report"]) == \
            ("P0002", f"run_id: no run {data['runs']['nightly-report']}")
        assert _err(alice, "SELECT cronbox.rerun(NULL)")[0] == "22004"
        assert _err(alice, "SELECT cronbox.rerun(%s, reason => repeat('x', 1001))", failed)[0] == "22023"
    with db.connect(fresh_dsn) as su:
        old = su.execute("SELECT job, fire_at, payload::text FROM cronbox.runs WHERE run_id = %s", (failed,)).fetchone()
        row = su.execute("SELECT job, fire_at, payload::text, origin, attempt, state FROM cronbox.runs WHERE run_id = %s",
                         (new,)).fetchone()
        # same job, fire time and payload (even one orjson could not read); runs although paused
        assert row == (*old, "rerun", 1, "dispatched")
        assert su.execute("SELECT count(*) FROM cronbox.outbox WHERE run_id = %s", (new,)).fetchone()[0] == 1
        assert su.execute("SELECT changed_by, reason FROM cronbox.schedule_changes WHERE action = 'rerun' "
                          "ORDER BY change_id").fetchall() \
            == [(logins.name("alice"), f"fixed the disk (run {failed})"), (logins.name("alice"), f"rerun by operator (run {failed})")]
        assert _err(su, "SELECT cronbox.rerun(%s)", data["runs"]["nightly-report"])[0] == "55000"  # still in flight
    with logins.connect(fresh_dsn, "reader") as reader:
        assert _err(reader, "SELECT cronbox.rerun(%s)", failed)[0] == "42501"
        assert _err(reader, "SELECT cronbox.delete_dead_letter(%s)", data["dead_letter"])[0] == "42501"
    with logins.connect(fresh_dsn, "alice") as alice:
        assert _err(alice, "SELECT cronbox.delete_dead_letter(%s)", data["dead_letter"])[0] == "42501"
    with logins.connect(fresh_dsn, "admin") as admin:
        assert admin.execute("SELECT cronbox.delete_dead_letter(%s)", (data["dead_letter"],)).fetchone()[0] is True
        assert _err(admin, "SELECT cronbox.delete_dead_letter(%s)", data["dead_letter"]) == \
            ("P0002", f"id: no dead letter {data['dead_letter']}")
        assert admin.execute("SELECT count(*) FROM cronbox.dead_letters").fetchone()[0] == 0


def test_dependency_graph_gives_edges_both_ways_with_last_states(fresh_dsn, logins):  # noqa: F811
    with db.connect(fresh_dsn) as su:
        for name in ("extract", "load", "report"):
            su.execute("SELECT cronbox.schedule(%s, cron => '0 3 * * *')", (name,))
        su.execute("SELECT cronbox.add_dependency('load', 'extract')")
        su.execute("SELECT cronbox.schedule('publish', after => ARRAY['load', 'report'])")
        su.execute("SELECT cronbox.schedule('archive', after => ARRAY['publish'])")
        su.execute("SELECT cronbox.trigger('extract')")
        run = su.execute("SELECT run_id FROM cronbox.runs WHERE job = 'extract'").fetchone()[0]
        su.execute("SELECT cronbox.fail_run(%s, 'boom', false)", (run,))
        rows = su.execute("SELECT * FROM cronbox.dependency_graph('load')").fetchall()
        assert rows == [
            ("load", "extract", "gate", -1, None, "failed"),
            ("publish", "load", "after", 1, None, None),
            ("archive", "publish", "after", 2, None, None),
        ]
        assert len(su.execute("SELECT * FROM cronbox.dependency_graph('load', depth => 1)").fetchall()) == 2
        for statement, state in (("SELECT * FROM cronbox.dependency_graph('nope')", "P0002"),
                                 ("SELECT * FROM cronbox.dependency_graph('load', depth => 6)", "22023"),
                                 ("SELECT * FROM cronbox.dependency_graph(NULL)", "22004")):
            assert _err(su, statement)[0] == state, statement
    with logins.connect(fresh_dsn, "reader") as reader:
        assert len(reader.execute("SELECT * FROM cronbox.dependency_graph('publish')").fetchall()) == 4
    with logins.connect(fresh_dsn, "alice") as alice:  # not hers: row security
        assert _err(alice, "SELECT * FROM cronbox.dependency_graph('load')")[0] == "P0002"


async def test_runs_sorted_by_duration_or_fire_time_page_by_keyset_without_gaps(fresh_dsn):
    from web import history

    with db.connect(fresh_dsn) as su:
        su.execute("SELECT cronbox.schedule('sorted', every => '1 hour', overlap => 'allow')")
        for seconds in (5, 1, 3, 2, 4):
            run = su.execute("SELECT cronbox.trigger('sorted')").fetchone()[0]
            run = su.execute("SELECT max(run_id) FROM cronbox.runs WHERE job = 'sorted'").fetchone()[0]
            su.execute("SELECT cronbox.start_run(%s, 'w')", (run,))
            su.execute("UPDATE cronbox.outbox SET started_at = now() - make_interval(secs => %s) WHERE outbox_id = %s",
                       (seconds, run))
            su.execute("SELECT cronbox.complete_run(%s)", (run,))
        su.execute("SELECT cronbox.trigger('sorted')")  # unfinished: after every finished one
    async with await db.aconnect(fresh_dsn) as conn:
        from psycopg.rows import dict_row

        conn.row_factory = dict_row
        for order in ("duration", "fire"):
            sorting, seen = history.Sorting(order=order), []
            while True:
                page = await history.runs(conn, history.Filters(), limit=2, sorting=sorting)
                seen += page[:2]
                if len(page) <= 2:
                    break
                sorting.top = sorting.top or page[0]["window_top"]
                key, _, run_id = f"{history.cursor_of(page[1], order)}|{page[1]['run_id']}".rpartition("|")
                sorting.after_key = float(key) if order == "duration" else page[1]["fire_at"]
                sorting.after_id = int(run_id)
            assert len(seen) == 6 and len({r["run_id"] for r in seen}) == 6, (order, [(r["state"], r["duration"]) for r in seen])
            if order == "duration":
                secs = [round(r["duration"].total_seconds()) if r["duration"] else None for r in seen]
                assert secs == [5, 4, 3, 2, 1, None], secs
            else:
                assert [r["fire_at"] for r in seen] == sorted((r["fire_at"] for r in seen), reverse=True)
