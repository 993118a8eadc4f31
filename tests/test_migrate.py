"""The migrator: idempotent, safe concurrently, versioned, refuses a newer schema."""

from __future__ import annotations

import os
import shutil
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import psycopg
import pytest

from cronbox import db
from cronbox.migrate import MigrateError, migrate, migrations, sql_root

from .conftest import cronbox_cmd


def _schema_fingerprint(dsn: str) -> list[tuple]:
    with db.connect(dsn) as conn:
        return conn.execute(
            """
            SELECT c.relname, c.relkind, pg_catalog.pg_get_userbyid(c.relowner), c.xmin::text
            FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
            WHERE n.nspname = 'cronbox'
            UNION ALL
            SELECT p.proname, 'f', pg_catalog.md5(p.prosrc), p.xmin::text
            FROM pg_catalog.pg_proc p JOIN pg_catalog.pg_namespace n ON n.oid = p.pronamespace
            WHERE n.nspname = 'cronbox'
            ORDER BY 1, 2
            """
        ).fetchall()


def test_migrating_twice_changes_nothing(fresh_dsn):
    before = _schema_fingerprint(fresh_dsn)
    result = migrate(fresh_dsn)
    assert result.applied == [] and not result.code_reapplied
    assert _schema_fingerprint(fresh_dsn) == before  # not even a catalog row rewritten


def test_version_table_records_every_migration(fresh_dsn):
    with db.connect(fresh_dsn) as conn:
        versions = [r[0] for r in conn.execute("SELECT version FROM cronbox.schema_version ORDER BY 1")]
    assert versions == [m.version for m in migrations()]


def test_concurrent_migrations_of_an_empty_database_are_a_no_op_for_all_but_one(pg):
    dsn = pg.create_db("cronbox_concurrent_migrate")
    try:
        with ThreadPoolExecutor(4) as ex:
            results = list(ex.map(lambda _: migrate(dsn), range(4)))
        assert sorted(len(r.applied) for r in results) == [0, 0, 0, len(migrations())]
        with db.connect(dsn) as conn:
            assert conn.execute("SELECT count(*) FROM cronbox.schema_version").fetchone()[0] == len(migrations())
    finally:
        pg.drop_db("cronbox_concurrent_migrate")


def test_refuses_a_database_newer_than_the_code(fresh_dsn):
    with db.connect(fresh_dsn) as conn:
        conn.execute("INSERT INTO cronbox.schema_version (version, name) VALUES (9999, '9999_from_the_future')")
    with pytest.raises(MigrateError, match="newer than this cronbox"):
        migrate(fresh_dsn)


def test_a_failing_migration_leaves_no_version_row(fresh_dsn, tmp_path: Path):
    root = tmp_path / "sql"
    shutil.copytree(sql_root(), root)
    (root / "migrations" / "9000_break_things.sql").write_text(
        "CREATE TABLE cronbox.half_written (x int);\nSELECT 1/0;\n")
    with pytest.raises(psycopg.errors.DivisionByZero):
        migrate(fresh_dsn, root)
    with db.connect(fresh_dsn) as conn:
        assert conn.execute("SELECT to_regclass('cronbox.half_written')").fetchone()[0] is None
        assert conn.execute("SELECT count(*) FROM cronbox.schema_version WHERE version = 9000").fetchone()[0] == 0


def test_cli_migrate_reports_and_is_idempotent(fresh_dsn):
    env = {"DATABASE_URL": fresh_dsn, "PATH": "/usr/bin:/bin"}
    out = subprocess.run(cronbox_cmd("migrate"), env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert "nothing to do" in out.stdout


@pytest.mark.parametrize(
    "dsn_suffix, expected",
    [
        ("postgresql://postgres@127.0.0.1:1/postgres", "cannot connect to PostgreSQL"),
        ("postgresql://nosuchuser:secret@127.0.0.1:{port}/postgres", "cannot connect to PostgreSQL"),
    ],
)
def test_cli_unreachable_database_is_one_clear_line(pg, dsn_suffix, expected):
    port = psycopg.conninfo.conninfo_to_dict(pg.admin_dsn).get("port", "5432")
    env = {"DATABASE_URL": dsn_suffix.format(port=port), "PATH": "/usr/bin:/bin"}
    out = subprocess.run(cronbox_cmd("migrate"), env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 1
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and expected in lines[0], out.stderr
    assert "secret" not in out.stderr


def test_cli_poller_against_a_database_without_the_schema_is_one_clear_line(pg):
    dsn = pg.create_db("cronbox_no_schema")
    try:
        out = subprocess.run(cronbox_cmd("poller"), env={"DATABASE_URL": dsn, "PATH": "/usr/bin:/bin"},
                             capture_output=True, text=True, timeout=60)
        assert out.returncode == 1
        assert out.stderr.strip() == "cronbox: the cronbox schema is missing: run `cronbox migrate`"
    finally:
        pg.drop_db("cronbox_no_schema")


def test_migrate_while_the_processes_run_loses_and_doubles_nothing(fresh_dsn, tmp_path):
    """docs/operations.md "Upgrading": a new release migrated under running pollers, relays and
    workers. The new release here is the same tree plus a migration and a changed function body
    (so every function, view and grant is re-applied): the running processes go on without a
    restart, every fire runs once."""
    from .procs import Proc, demo_worker, wait_until

    root = tmp_path / "sql"
    shutil.copytree(sql_root(), root)
    (root / "migrations" / "9990_add_upgrade_probe.sql").write_text(
        "ALTER TABLE cronbox.job ADD COLUMN upgrade_probe text;\n")
    helper = root / "functions" / "internal" / "clip_text.sql"
    helper.write_text(helper.read_text().replace("\nCREATE OR REPLACE", "\n-- new release\nCREATE OR REPLACE", 1))
    with db.connect(fresh_dsn) as conn:
        conn.execute("SELECT cronbox.schedule('up', cron => '* * * * * *')")
    worker, port = demo_worker(fresh_dsn, tmp_path)
    wait_until(lambda: "listening" in worker.output, timeout=30, what="the demo worker to listen")

    def succeeded() -> int:
        with db.connect(fresh_dsn) as conn:
            return conn.execute("SELECT count(*) FROM cronbox.runs WHERE job = 'up' AND state = 'succeeded'").fetchone()[0]

    with worker, Proc("poller", fresh_dsn, tmp_path) as poller, \
            Proc("relay", fresh_dsn, tmp_path, CRONBOX_SINKS=f"*=http://127.0.0.1:{port}/run") as relay:
        wait_until(lambda: succeeded() >= 2, timeout=30, what="runs before the upgrade")
        result = migrate(fresh_dsn, root)
        assert result.applied and result.code_reapplied
        before = succeeded()
        wait_until(lambda: succeeded() >= before + 3, timeout=30, what="runs after the upgrade, no restart")
        for proc in (poller, relay, worker):
            assert proc.popen.poll() is None, proc.output
        assert relay.terminate() == 0, relay.output
        assert poller.terminate() == 0, poller.output
        assert "failed" not in poller.output and "failed" not in relay.output, poller.output + relay.output
    with db.connect(fresh_dsn) as conn:
        assert conn.execute("SELECT fire_at FROM cronbox.runs GROUP BY job_id, fire_at, attempt "
                            "HAVING count(*) > 1").fetchall() == []
        assert conn.execute("SELECT count(*) FROM cronbox.runs WHERE state IN ('failed', 'lost')").fetchone()[0] == 0


def sql_before(migration: str, tmp_path: Path) -> Path:
    """The sql/ folder of this repository as it was before `migration` was added (from its git
    history; the test is skipped without it)."""
    repo = Path(__file__).resolve().parent.parent
    added = subprocess.run(["git", "-C", str(repo), "log", "--format=%H", "--diff-filter=A", "-1", "--",
                            f"sql/migrations/{migration}"], capture_output=True, text=True)
    if added.returncode != 0 or not added.stdout.strip():
        pytest.skip("needs the git history of this repository")
    old = tmp_path / "old"
    old.mkdir()
    archive = subprocess.run(["git", "-C", str(repo), "archive", added.stdout.strip() + "^", "sql"],
                             capture_output=True, check=True)
    subprocess.run(["tar", "-x", "-C", str(old)], input=archive.stdout, check=True)
    return old / "sql"


def test_the_saturation_state_moves_with_every_job_to_job_fire(pg, tmp_path: Path):
    # A database migrated by the code before migration 0331, its jobs in every state, then
    # migrated by this code: each job's frontier, next fire, fires made and paused flag are in
    # its cronbox.job_fire row, and the claim takes the due job and leaves the paused one.
    old = sql_before("0331_create_job_fire.sql", tmp_path)
    name = f"cronbox_m{os.getpid()}"
    dsn = pg.create_db(name)
    try:
        migrate(dsn, old)
        t0 = "2030-01-01 00:00:00+00"
        with db.connect(dsn) as conn:
            for name, extra in (("due", ""), ("paused", ""), ("limited", ", max_runs => 5"), ("done", "")):
                conn.execute(f"SELECT cronbox.schedule_at('{name}', every => '1 minute'{extra}, p_now => %s)", (t0,))
            conn.execute("SELECT cronbox.schedule_at('waits', after => ARRAY['due'], p_now => %s)", (t0,))
            conn.execute("UPDATE cronbox.job SET frontier = %s::timestamptz + interval '10 seconds', "
                         "next_fire = %s::timestamptz + interval '20 seconds', fires_made = 3 WHERE name = 'limited'",
                         (t0, t0))
            conn.execute("UPDATE cronbox.job SET next_fire = NULL, finished_at = %s WHERE name = 'done'", (t0,))
            conn.execute("SELECT cronbox.pause_at('paused', p_now => %s)", (t0,))
            before = {r[0]: r[1:] for r in conn.execute(
                "SELECT name, frontier, next_fire, fires_made, paused FROM cronbox.job")}
        migrate(dsn)
        with db.connect(dsn) as conn:
            after = {r[0]: r[1:] for r in conn.execute(
                "SELECT j.name, f.frontier, f.next_fire, f.fires_made, f.paused "
                "FROM cronbox.job j JOIN cronbox.job_fire f USING (job_id)")}
            assert after == before and len(after) == 5
            assert [r[0] for r in conn.execute(
                "SELECT name FROM cronbox.claim_saturation_at(100, '2 minutes', p_now => %s::timestamptz) c "
                "JOIN cronbox.job USING (job_id) ORDER BY name", (t0,))] == ["due", "limited"]
            # the views keep their columns and show the moved state
            assert conn.execute("SELECT fires_made FROM cronbox.schedule_definitions WHERE name = 'limited'"
                                ).fetchone()[0] == 3
    finally:
        pg.drop_db(name)


def test_the_after_job_edges_are_made_from_every_existing_after_list(pg, tmp_path: Path):
    # A database migrated by the code before migration 0467, with after-jobs, then migrated by
    # this code: cronbox.job_after_edge holds one row per name listed, with the job's bucket.
    old = sql_before("0467_keep_after_job_edges.sql", tmp_path)
    name = f"cronbox_e{os.getpid()}"
    dsn = pg.create_db(name)
    try:
        migrate(dsn, old)
        with db.connect(dsn) as conn:
            for job in ("a", "b"):
                conn.execute("SELECT cronbox.schedule(%s, every => '1 minute')", (job,))
            conn.execute("SELECT cronbox.schedule('c', after => ARRAY['a', 'b'])")
            conn.execute("SELECT cronbox.schedule('d', after => ARRAY['c'])")
        migrate(dsn)
        with db.connect(dsn) as conn:
            assert sorted(conn.execute(
                "SELECT j.name, e.upstream, e.bucket = j.bucket FROM cronbox.job_after_edge e "
                "JOIN cronbox.job j USING (job_id)").fetchall()) == [
                    ("c", "a", True), ("c", "b", True), ("d", "c", True)]
    finally:
        pg.drop_db(name)


def _outbox_queue_idx(dsn: str) -> tuple[int, str]:
    with db.connect(dsn) as conn:
        return conn.execute(
            "SELECT c.relfilenode, pg_get_indexdef(c.oid) FROM pg_catalog.pg_class c"
            " WHERE c.oid = 'cronbox.outbox_queue_idx'::regclass").fetchone()


@pytest.mark.parametrize("before", ["0469_outbox_queue_idx_key_tiebreak.sql", "0472_outbox_queue_idx_without_key.sql"])
def test_the_outbox_claim_index_ends_as_queue_and_due_time_built_only_where_it_had_the_key(pg, tmp_path: Path, before):
    # From before 0469 (the index never had the key): upgraded without rebuilding it (the same
    # file node). From before 0472 as it was released (0469 added the key): rebuilt once, without it.
    old = sql_before(before, tmp_path)
    name = f"cronbox_q{os.getpid()}"
    dsn = pg.create_db(name)
    try:
        migrate(dsn, old)
        node, definition = _outbox_queue_idx(dsn)
        had_key = definition.endswith("(queue, available_at, outbox_id)")
        assert had_key is before.startswith("0472"), definition
        migrate(dsn)
        after_node, after_definition = _outbox_queue_idx(dsn)
        assert after_definition.endswith("USING btree (queue, available_at)"), after_definition
        assert (after_node != node) is had_key
    finally:
        pg.drop_db(name)
