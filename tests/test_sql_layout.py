"""The SQL API's shape: time is never a parameter of what a cronbox role may execute, each
function's file recreates it exactly when applied alone with psql, the folders of
sql/functions/ say who may call what, and an old-schema database migrates forward."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import psycopg
import pytest

from cronbox import db
from cronbox.migrate import FUNCTION_FOLDERS, code_files, migrate, sql_root
from cronbox.pgcluster import find_bindir

from .roles import logins  # noqa: F401  (fixture)

ROLES = ("cronbox_admin", "cronbox_user", "cronbox_worker", "cronbox_reader", "cronbox_process")
# Parameters of a time type that are data, not a clock: when a user wants a job to fire, and
# the fire times the poller computed from the schedule (never from its own clock).
TIME_DATA = {
    "schedule": {"at", "starts_at", "ends_at"},
    "preview": {"starts_at"},
    "create_calendar": {"dates", "ranges"},  # the excluded days, not a clock
    "pause": {"until"},  # when a paused job resumes by itself
    "backfill": {"from", "to"},  # the range of scheduled times to fire
    "store_backfill": {"p_fire_at", "p_done_through"},  # fire times the poller computed
    "run_id_at": {"p_ts"},
    "store_fires": {"p_fire_at", "p_frontier", "p_next_fire", "p_gap_last"},
    # where the last early-dispatch call's walk stopped (its own walked_to, read from the
    # database's clock); any value only leaves fires to dispatch at their due time
    "dispatch_ahead": {"p_walked_to"},
}
FOLDER_ROLES = {
    "internal": set(),
    "helper": set(ROLES),
    "worker": {"cronbox_worker", "cronbox_process"},  # cronbox_process is a member of cronbox_worker
    "process": {"cronbox_process"},
    "web": set(),  # cronbox_web only: the console's own registry entry
}
CATALOG = """
    SELECT p.oid::regprocedure::text, pg_catalog.pg_get_functiondef(p.oid), p.proacl::text,
           pg_catalog.obj_description(p.oid, 'pg_proc'), p.proowner::regrole::text
    FROM pg_catalog.pg_proc p WHERE p.pronamespace = 'cronbox'::regnamespace ORDER BY 1"""


def _executable(conn: psycopg.Connection) -> list[tuple[str, str, list[str], list[str]]]:
    """(signature, name, argument names, argument types) of each function any cronbox role may run."""
    return conn.execute("""
        SELECT p.oid::regprocedure::text, p.proname::text,
               coalesce(p.proargnames[1:p.pronargs], '{}'),
               ARRAY(SELECT pg_catalog.format_type(t, NULL) FROM unnest(p.proargtypes) t)
        FROM pg_catalog.pg_proc p
        WHERE p.pronamespace = 'cronbox'::regnamespace
          AND EXISTS (SELECT 1 FROM unnest(%s::text[]) r(role)
                      WHERE pg_catalog.has_function_privilege(r.role, p.oid, 'EXECUTE'))""",
        (list(ROLES),)).fetchall()


def test_no_function_a_cronbox_role_may_execute_takes_the_time(conn):
    found = _executable(conn)
    assert len(found) > 30
    for sig, name, argnames, argtypes in found:
        assert "p_now" not in argnames, sig
        assert not (name.endswith("_at") and name != "run_id_at"), sig
        for arg, typ in zip(argnames, argtypes):
            if typ.startswith(("timestamp", "date", "time ")):
                assert arg in TIME_DATA.get(name, set()), f"{sig}: {arg} is a time parameter"


def test_every_public_function_with_a_clock_has_an_internal_at_twin_nobody_may_run(conn):
    twins = conn.execute("""
        SELECT p.proname::text, p.oid::regprocedure::text, p.proargnames[p.pronargs]
        FROM pg_catalog.pg_proc p
        WHERE p.pronamespace = 'cronbox'::regnamespace AND p.proname ~ '_at$' AND p.proname <> 'run_id_at'
    """).fetchall()
    assert len(twins) >= 30
    for name, sig, last in twins:
        assert last == "p_now", sig  # convention: the time is the last parameter
        public = conn.execute("SELECT count(*) FROM pg_catalog.pg_proc WHERE pronamespace = "
                              "'cronbox'::regnamespace AND proname = %s", (name[:-3],)).fetchone()[0]
        assert public == 1, f"{sig}: no single public cronbox.{name[:-3]}"
        for role in ROLES:
            assert conn.execute("SELECT has_function_privilege(%s, %s::regprocedure, 'EXECUTE')",
                                (role, sig)).fetchone()[0] is False, (role, sig)


@pytest.mark.parametrize("who", ["admin", "alice", "worker", "reader", "process"])
def test_each_role_that_tries_to_pass_a_time_is_refused(fresh_dsn, logins, who):  # noqa: F811
    with db.connect(logins.dsn(fresh_dsn, who)) as c:
        for stmt, state in [
            # the internal bodies that take the time: no privilege
            ("SELECT cronbox.schedule_at('t', every => '1 hour', p_now => 'infinity')", "42501"),
            ("SELECT cronbox.trigger_at('t', p_now => 'infinity')", "42501"),
            ("SELECT cronbox.heartbeat_at(1, 'w', NULL)", "42501"),
            ("SELECT cronbox.complete_run_at(1, NULL, NULL)", "42501"),
            ("SELECT * FROM cronbox.dispatch_at(10, p_now => now() + interval '1 day')", "42501"),
            ("SELECT * FROM cronbox.claim_outbox_at('r', 10, p_now => NULL)", "42501"),
            # the public functions have no time parameter at all
            ("SELECT cronbox.trigger('t', p_now => 'infinity')", "42883"),
            ("SELECT cronbox.heartbeat(1, 'w', p_now => NULL)", "42883"),
            ("SELECT cronbox.complete_run(1, NULL, NULL::timestamptz)", "42883"),
            ("SELECT cronbox.pause('t', 'r', false, now() + interval '1 hour', now())", "42883"),
        ]:
            with pytest.raises(psycopg.Error) as err:
                c.execute(stmt)
            assert err.value.sqlstate == state, (who, stmt, err.value)
            c.rollback()


def test_function_folders_match_the_grants(conn):
    root = sql_root() / "functions"
    assert sorted(p.name for p in root.iterdir() if p.is_dir()) == sorted(FUNCTION_FOLDERS)
    assert not list(root.glob("*.sql")), "function files belong in a folder that says who may call them"
    for folder in FUNCTION_FOLDERS:
        for path in (root / folder).glob("*.sql"):
            rows = conn.execute("""
                SELECT p.oid FROM pg_catalog.pg_proc p
                WHERE p.pronamespace = 'cronbox'::regnamespace AND p.proname = %s""", (path.stem,)).fetchall()
            assert len(rows) == 1, f"{folder}/{path.name}: one function named after the file"
            may = {r for r in ROLES if conn.execute(
                "SELECT has_function_privilege(%s, %s, 'EXECUTE')", (r, rows[0][0])).fetchone()[0]}
            if folder == "admin":
                assert "cronbox_admin" in may and may <= {"cronbox_admin", "cronbox_user"}, (path, may)
            else:
                assert may == FOLDER_ROLES[folder], (path, may)
            web = conn.execute("SELECT has_function_privilege('cronbox_web', %s, 'EXECUTE')", (rows[0][0],)).fetchone()[0]
            assert web == (folder == "web"), (path, web)


def _psql() -> str:
    found = shutil.which("psql")
    return found or str(find_bindir() / "psql")


@pytest.mark.slow
def test_each_function_file_applied_alone_recreates_it_exactly(fresh_dsn):
    with db.connect(fresh_dsn) as c:
        before = c.execute(CATALOG).fetchall()
        # scramble what a file must restore by itself: owner, grants, security, search_path
        for (sig,) in c.execute("SELECT p.oid::regprocedure::text FROM pg_catalog.pg_proc p "
                                "WHERE p.pronamespace = 'cronbox'::regnamespace").fetchall():
            c.execute(f"GRANT EXECUTE ON FUNCTION {sig} TO PUBLIC, cronbox_reader")
            c.execute(f"ALTER FUNCTION {sig} SECURITY INVOKER RESET ALL")
            c.execute(f"ALTER FUNCTION {sig} OWNER TO CURRENT_USER")
    files = [p for p in code_files() if p.parent.parent.name == "functions"]
    assert len(files) > 60
    info = psycopg.conninfo.conninfo_to_dict(fresh_dsn)
    info.pop("options", None)
    for path in files:
        subprocess.run([_psql(), "-X", "-q", "-v", "ON_ERROR_STOP=1", "-1", "-f", str(path),
                        psycopg.conninfo.make_conninfo(**info)], check=True, capture_output=True, timeout=60)
    with db.connect(fresh_dsn) as c:
        after = c.execute(CATALOG).fetchall()
    assert after == before


def test_a_database_migrated_by_the_old_code_migrates_forward(pg, tmp_path):
    """Migrations 0001-0052 with the previous function tree (flat sql/functions/, p_now
    parameters, grants by name pattern), as the commit before the split left them: the new
    migrate drops the old signatures and ends with the same catalog as a fresh database."""
    old = Path(__file__).resolve().parent.parent
    git = ["git", "-C", str(old)]
    gone = subprocess.run([*git, "log", "--diff-filter=D", "--format=%H", "-1", "--",
                           "sql/functions/schedule.sql"], capture_output=True, text=True)
    rev = f"{gone.stdout.strip()}^" if gone.stdout.strip() else "HEAD"
    if gone.returncode != 0 or subprocess.run([*git, "cat-file", "-e", f"{rev}:sql/functions/schedule.sql"],
                                              capture_output=True).returncode != 0:
        pytest.skip("no git history of the flat function tree")
    subprocess.run(f"git -C {old} archive {rev} sql | tar -x -C {tmp_path}", shell=True, check=True)
    assert (tmp_path / "sql" / "functions" / "schedule.sql").exists()
    names = [f"cronbox_old_{id(tmp_path)}", f"cronbox_new_{id(tmp_path)}"]
    try:
        old_dsn, new_dsn = (pg.create_db(n) for n in names)
        _legacy_migrate(old_dsn, tmp_path / "sql")
        with db.connect(old_dsn) as c:
            assert c.execute("SELECT count(*) FROM pg_catalog.pg_proc WHERE proname = 'schedule' "
                             "AND 'p_now' = ANY (proargnames)").fetchone()[0] == 1
        migrate(old_dsn)
        migrate(new_dsn)
        with db.connect(old_dsn) as a, db.connect(new_dsn) as b:
            assert a.execute(CATALOG).fetchall() == b.execute(CATALOG).fetchall()
    finally:
        for n in names:
            pg.drop_db(n)


def _legacy_migrate(dsn: str, root: Path) -> None:
    """The old migrator's steps (flat functions folder) over the old tree."""
    import cronbox.migrate as m

    files = sorted((root / "functions").glob("*.sql")) + sorted((root / "views").glob("*.sql"))
    files.append(root / "grants.sql")
    known = m.migrations(root)
    with db.connect(dsn) as conn:
        m._migrate_locked(conn, known, files, m.code_digest(files))


def test_the_functions_without_a_pinned_search_path_are_those_the_operations_guide_names(conn):
    unpinned = {r[0] for r in conn.execute("""
        SELECT p.proname FROM pg_catalog.pg_proc p
        WHERE p.pronamespace = 'cronbox'::regnamespace
          AND NOT coalesce('search_path=pg_catalog, pg_temp' = ANY (p.proconfig), false)""").fetchall()}
    guide = (Path(__file__).resolve().parent.parent / "docs" / "operations.md").read_text()
    paragraph = guide[guide.index("The only functions without a pinned `search_path`"):].split("\n\n")[0]
    words = ("zero one two three four five six seven eight nine ten eleven twelve").split()
    assert f" {words[len(unpinned)]} internal" in paragraph, (sorted(unpinned), paragraph)
    assert all(f"`{name}`" in paragraph for name in unpinned), (sorted(unpinned), paragraph)


def test_every_insert_into_history_writes_its_trouble_column():
    """`cronbox.run.trouble` is a plain column (migration 0441): each statement that inserts a
    history row writes it with cronbox.run_trouble(state), so the console's trouble index sees
    every failed, lost, cancelled, skipped and missed run."""
    import re
    inserts = []
    for path in sorted(sql_root().joinpath("functions").rglob("*.sql")):
        for m in re.finditer(r"INSERT INTO cronbox\.run\b(?! *\.)(?:\s+AS\s+\w+)?\s*\(([^)]*)\)", path.read_text()):
            inserts.append((path.name, m.group(1)))
    assert len(inserts) >= 5
    missing = [name for name, columns in inserts if not re.search(r"\btrouble\b", columns)]
    assert missing == []
