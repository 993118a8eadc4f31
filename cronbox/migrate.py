"""`cronbox migrate`: forward-only numbered migrations, then the re-applied code.

1. Under a session advisory lock (so concurrent migrates serialise and the second is a no-op),
   bootstrap schema `cronbox` and its version table.
2. Refuse if the database has a migration newer than this code knows.
3. Apply each pending `sql/migrations/NNNN_*.sql` in its own transaction, writing its version
   row in that same transaction.
4. Re-apply, in one transaction and only if their content digest changed (migrating twice
   changes nothing): `sql/drop_old_signatures.sql`, then `sql/functions/<folder>/*.sql` folder
   by folder (internal, helper, admin, worker, process, web: who may call them, see FUNCTION_FOLDERS),
   then `sql/views/*.sql`, then `sql/grants.sql`.
5. Run maintenance that must exist before the first dispatch (today's history partitions).
"""

from __future__ import annotations

import dataclasses
import hashlib
import logging
import re
from pathlib import Path

import psycopg

from cronbox import db

log = logging.getLogger("cronbox.migrate")

LOCK_KEY = 0x63726F6E626F78  # "cronbox"
_MIGRATION_NAME = re.compile(r"^(\d{4})_[a-z0-9_]+\.sql$")


class MigrateError(RuntimeError):
    pass


def sql_root() -> Path:
    """The SQL tree: inside the installed package (wheel), else the repository's sql/."""
    here = Path(__file__).resolve().parent
    for candidate in (here / "sql", here.parent / "sql"):
        if (candidate / "migrations").is_dir():
            return candidate
    raise MigrateError(f"cannot find the SQL files (looked in {here / 'sql'} and {here.parent / 'sql'})")


@dataclasses.dataclass(frozen=True)
class Migration:
    version: int
    name: str
    path: Path


def migrations(root: Path | None = None) -> list[Migration]:
    root = root or sql_root()
    found: list[Migration] = []
    for path in sorted((root / "migrations").glob("*.sql")):
        m = _MIGRATION_NAME.match(path.name)
        if not m:
            raise MigrateError(f"bad migration file name {path.name}: expected NNNN_verb_noun.sql")
        found.append(Migration(int(m.group(1)), path.stem, path))
    versions = [m.version for m in found]
    if len(set(versions)) != len(versions):
        raise MigrateError("two migrations share a version number")
    return found


# sql/functions/ subfolders, grouped by who may execute them, in the order they are applied:
# bodies first so that the thin public wrappers (LANGUAGE sql) find what they call.
FUNCTION_FOLDERS = ("internal", "helper", "admin", "worker", "process", "web")


def code_files(root: Path | None = None) -> list[Path]:
    """Re-applied on every migrate, in this order: old signatures dropped, functions (folder by
    folder), views, grants. A .sql file directly in functions/ or in an unknown folder is an
    error: its role decision would be unclear."""
    root = root or sql_root()
    functions = root / "functions"
    stray = sorted(p for p in functions.rglob("*.sql") if p.parent.name not in FUNCTION_FOLDERS
                   or p.parent.parent != functions)
    if stray:
        raise MigrateError(f"SQL function file(s) outside {', '.join(FUNCTION_FOLDERS)}: "
                           + ", ".join(str(p.relative_to(root)) for p in stray))
    files: list[Path] = []
    drops = root / "drop_old_signatures.sql"
    if drops.exists():
        files.append(drops)
    for folder in FUNCTION_FOLDERS:
        files += sorted((functions / folder).glob("*.sql"))
    files += sorted((root / "views").glob("*.sql"))
    grants = root / "grants.sql"
    return files + ([grants] if grants.exists() else [])


def code_digest(files: list[Path]) -> str:
    h = hashlib.sha256()
    for path in files:
        h.update(path.parent.name.encode() + b"/" + path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()


@dataclasses.dataclass
class Result:
    applied: list[str]
    code_reapplied: bool
    version: int


def version_tables(version_table: str, code_table: str) -> str:
    """The DDL of a layer's bookkeeping: its applied migrations and the digest of its code."""
    return f"""
CREATE TABLE IF NOT EXISTS {version_table} (
    version     integer PRIMARY KEY,
    name        text NOT NULL,
    applied_at  timestamptz NOT NULL DEFAULT now(),
    applied_by  name NOT NULL DEFAULT current_user
);
CREATE TABLE IF NOT EXISTS {code_table} (
    singleton   boolean PRIMARY KEY DEFAULT true CONSTRAINT {code_table.split('.')[-1]}_one_row CHECK (singleton),
    digest      text NOT NULL,
    applied_at  timestamptz NOT NULL DEFAULT now()
);
"""


_BOOTSTRAP = "CREATE SCHEMA IF NOT EXISTS cronbox;" + version_tables("cronbox.schema_version", "cronbox.schema_code")


def migrate(dsn: str, root: Path | None = None) -> Result:
    root = root or sql_root()
    known = migrations(root)
    files = code_files(root)
    digest = code_digest(files)
    with db.connect(dsn) as conn:
        conn.execute("SELECT pg_catalog.pg_advisory_lock(%s)", (LOCK_KEY,))
        try:
            return _migrate_locked(conn, known, files, digest)
        finally:
            conn.execute("SELECT pg_catalog.pg_advisory_unlock(%s)", (LOCK_KEY,))


def _migrate_locked(conn: psycopg.Connection, known: list[Migration], files: list[Path], digest: str) -> Result:
    with conn.transaction():
        conn.execute(_BOOTSTRAP)
    applied = apply_migrations(conn, known, "cronbox.schema_version")
    reapply = apply_code(conn, files, digest, "cronbox.schema_code", force=applied != [])
    with conn.transaction():
        conn.execute("SELECT cronbox.ensure_run_partitions()")
    return Result(applied=applied, code_reapplied=reapply, version=max((m.version for m in known), default=0))


def apply_migrations(conn: psycopg.Connection, known: list[Migration], version_table: str, what: str = "") -> list[str]:
    """Each pending migration in its own transaction, its version row in the same one; refused
    when the database has a migration newer than this code knows. Returns those applied."""
    done = {row[0] for row in conn.execute(f"SELECT version FROM {version_table}")}
    newest_known = max((m.version for m in known), default=0)
    if done and max(done) > newest_known:
        raise MigrateError(
            f"the database{what} schema is at version {max(done)}, newer than this cronbox "
            f"(knows up to {newest_known}): upgrade cronbox before running it against this database"
        )
    applied: list[str] = []
    for m in known:
        if m.version in done:
            continue
        with conn.transaction():
            conn.execute(m.path.read_text())
            conn.execute(f"INSERT INTO {version_table} (version, name) VALUES (%s, %s)", (m.version, m.name))
        log.info("applied migration %s", m.name)
        applied.append(m.name)
    return applied


def apply_code(conn: psycopg.Connection, files: list[Path], digest: str, code_table: str, *, force: bool) -> bool:
    """Re-apply the code files in one transaction when forced or their digest changed; returns
    whether it did."""
    row = conn.execute(f"SELECT digest FROM {code_table}").fetchone()
    if not (force or row is None or row[0] != digest):
        return False
    with conn.transaction():
        # Bodies may refer to functions defined in later files.
        conn.execute("SET LOCAL check_function_bodies = off")
        for path in files:
            try:
                conn.execute(path.read_text())
            except psycopg.Error as exc:
                raise MigrateError(f"{path.parent.name}/{path.name}: {exc}") from exc
        conn.execute(
            f"INSERT INTO {code_table} (singleton, digest) VALUES (true, %s) "
            "ON CONFLICT (singleton) DO UPDATE SET digest = excluded.digest, applied_at = now()",
            (digest,),
        )
    log.info("applied %d function/view files", len(files))
    return True
