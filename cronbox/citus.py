"""`cronbox migrate --citus`: the schema on a Citus coordinator (docs/citus.md).

The same migrations as on plain PostgreSQL run first (`cronbox.migrate`); then, on a
coordinator only, the owner role may log in on the worker nodes (Citus writes there as the
user running a statement: inside cronbox's SECURITY DEFINER functions, the owner) and the small
operator-written tables every bucket will read are made Citus reference tables (one copy on
every node, written on all of them in one distributed transaction). The hot tables (jobs, job
futures, outbox, run history, job statistics) stay local tables on the coordinator for now:
docs/citus.md says why and what distributing them by a bucket of the job takes.

On a database without the Citus extension, or on a Citus worker node, it refuses before
anything is written.
"""

from __future__ import annotations

import dataclasses
import logging

import psycopg

from cronbox import db
from cronbox.migrate import LOCK_KEY, MigrateError, Result, migrate

log = logging.getLogger("cronbox.citus")

# Read by the decisions, written only by an operator (the time zone list, queue grants): a copy
# on every node is what a bucket's functions will read there. The other small shared tables are
# not, yet (docs/citus.md, "What works and what does not yet"): queue_limit, pool and
# owner_quota are counters updated by statements that read the hot tables through a function
# or a trigger's transition table, which Citus cannot see into: it ships such a statement to
# every node, where the coordinator's local tables do not exist; cronbox.calendar has row
# security whose policies hold subqueries, which Citus refuses on any of its tables.
REFERENCE_TABLES = ("time_zone", "queue_grant")

# The role that owns cronbox's tables and SECURITY DEFINER functions. Citus writes a reference
# table's copies on the worker nodes over connections made as the current user, which inside
# such a function is this NOLOGIN role: it must be allowed to log in there (only there).
OWNER_ROLE = "cronbox_owner"


@dataclasses.dataclass
class CitusResult:
    schema: Result
    citus_version: str
    worker_nodes: int
    made_reference: list[str]


def check_coordinator(conn: psycopg.Connection) -> tuple[str, int]:
    """The Citus version and the number of worker nodes, or a MigrateError when this database
    is not a Citus coordinator (no extension, or a worker node)."""
    row = conn.execute("SELECT extversion FROM pg_catalog.pg_extension WHERE extname = 'citus'").fetchone()
    if row is None:
        raise MigrateError("--citus needs the Citus extension in this database and it is not there "
                           "(CREATE EXTENSION citus on the coordinator and every worker node: docs/citus.md); "
                           "without --citus the schema is a plain PostgreSQL one")
    version = row[0]
    if not conn.execute("SELECT pg_catalog.citus_is_coordinator()").fetchone()[0]:
        raise MigrateError("--citus runs on the Citus coordinator, and this is not it "
                           "(a worker node, or a coordinator not registered: citus_set_coordinator_host)")
    workers = conn.execute(
        "SELECT count(*) FROM pg_catalog.pg_dist_node WHERE groupid <> 0 AND noderole = 'primary' AND isactive"
    ).fetchone()[0]
    return version, workers


def reference_tables(conn: psycopg.Connection) -> set[str]:
    """The cronbox tables that are Citus reference tables."""
    rows = conn.execute(
        "SELECT c.relname FROM pg_catalog.pg_dist_partition p JOIN pg_catalog.pg_class c ON c.oid = p.logicalrelid"
        " WHERE c.relnamespace = 'cronbox'::regnamespace AND p.partmethod = 'n' AND p.repmodel = 't'"
    ).fetchall()
    return {r[0] for r in rows}


def owner_logs_in_on_workers(conn: psycopg.Connection) -> None:
    """Let the owner role log in on every worker node (not on the coordinator), each node's own
    ALTER ROLE: Citus would otherwise propagate it to every node, the coordinator included, and
    a node added later gets the coordinator's NOLOGIN with the other roles (run `cronbox migrate
    --citus` again after citus_add_node). Who may connect as it stays the workers' pg_hba.conf's
    (docs/citus.md, "Set up")."""
    rows = conn.execute(
        "SELECT nodename, nodeport, success, result FROM pg_catalog.run_command_on_workers("
        "format('SET citus.enable_alter_role_propagation TO off; ALTER ROLE %%I LOGIN', %s::text))",
        (OWNER_ROLE,)).fetchall()
    failed = [f"{host}:{port}: {result}" for host, port, ok, result in rows if not ok]
    if failed:
        raise MigrateError(f"could not let {OWNER_ROLE} log in on the worker nodes: " + "; ".join(failed))


def migrate_citus(dsn: str) -> CitusResult:
    """Check the coordinator, run the migrations, make the shared tables reference tables."""
    with db.connect(dsn) as conn:
        version, workers = check_coordinator(conn)
    schema = migrate(dsn)
    made: list[str] = []
    with db.connect(dsn) as conn:
        conn.execute("SELECT pg_catalog.pg_advisory_lock(%s)", (LOCK_KEY,))
        try:
            owner_logs_in_on_workers(conn)
            with conn.transaction():
                done = reference_tables(conn)
                for table in REFERENCE_TABLES:
                    if table not in done:
                        conn.execute("SELECT pg_catalog.create_reference_table(%s::regclass)", (f"cronbox.{table}",))
                        made.append(table)
        finally:
            conn.execute("SELECT pg_catalog.pg_advisory_unlock(%s)", (LOCK_KEY,))
    if made:
        log.info("made reference tables: %s", ", ".join(made))
    return CitusResult(schema=schema, citus_version=version, worker_nodes=workers, made_reference=made)
