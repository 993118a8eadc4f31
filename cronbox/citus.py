"""`cronbox migrate --citus`: the schema on a Citus coordinator (docs/citus.md).

The same migrations as on plain PostgreSQL run first (`cronbox.migrate`); then, on a
coordinator only, the owner role may log in on the worker nodes (Citus writes there as the
user running a statement: inside cronbox's SECURITY DEFINER functions, the owner), the small
operator-written tables every bucket will read are made Citus reference tables (one copy on
every node, written on all of them in one distributed transaction), and the Citus layer
(sql/citus/: its own numbered migrations, tracked in cronbox.citus_version, and its functions
and views) is applied: the buckets of the job (B of them, one per shard of the colocation group
cronbox.bucket_shard, listed in the reference table cronbox.bucket) and the bucket leases of
the pollers and relays. The hot tables (jobs, job futures, outbox, run history, job statistics)
stay local tables on the coordinator unless `--distribute` is given (`cronbox migrate --citus
--distribute`): then the layer's migration 0356 distributes them by the bucket of the job,
colocated with the buckets (docs/citus.md, "Distributing the hot tables"), and every later
migrate keeps them so and plans their hot functions with the bucket bound
(sql/citus/distributed_plans.sql, set again after every run: a function file applied again
drops the setting), and wraps the views that read them in cronbox.read_view
(sql/citus/distributed_views.sql, again after every run: a view file applied again makes the
view anew).

On a database without the Citus extension, on a Citus worker node, with a bucket count that is
not a power of two from 1 to 1,024, or with one other than the count the database already has,
it refuses before anything is written.
"""

from __future__ import annotations

import dataclasses
import logging
from pathlib import Path

import psycopg

from cronbox import db
from cronbox.migrate import (LOCK_KEY, MigrateError, Result, apply_code, apply_migrations, code_digest, code_files, migrate,
                             migrations, sql_root, version_tables)

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
# The role the report functions run as (migration 0440): the same holds for it.
RUNNER_ROLE = "cronbox_runner"

# The bucket count: a power of two (a run id has 10 bits for the bucket index), 32 unless
# `--buckets` says otherwise when the buckets are made; it never changes afterwards.
DEFAULT_BUCKETS = 32
MAX_BUCKETS = 1024
# The layer's migrations applied only when asked for (`--distribute`), kept by every migrate once
# applied: the hot tables distributed by bucket.
DISTRIBUTE_VERSIONS = frozenset({356, 357, 364})
# The process kinds that lease buckets, each kind its own set of leases.
LEASE_KINDS = ("poller", "relay")

_CITUS_BOOTSTRAP = version_tables("cronbox.citus_version", "cronbox.citus_code")

# One bucket value per shard of a distributed table: for each shard (by its hash range, in
# order: the bucket index), the smallest non-negative integer whose Citus hash falls into it.
# width_bucket finds a hash's shard among the ranges' lower bounds; 64 candidates per shard
# leave a shard without one with odds of about B * e^-64.
SHARD_VALUES = """
WITH shard AS (
    SELECT s.shardminvalue::integer AS hash_min, s.shardmaxvalue::integer AS hash_max,
           (row_number() OVER (ORDER BY s.shardminvalue::integer) - 1)::integer AS bucket_index
    FROM pg_catalog.pg_dist_shard s WHERE s.logicalrelid = %(table)s::regclass
), bounds AS (
    SELECT array_agg(shard.hash_min ORDER BY shard.hash_min) AS lows, count(*) AS n FROM shard
), candidate AS (
    SELECT DISTINCT ON (1) pg_catalog.width_bucket(pg_catalog.worker_hash(v), b.lows) - 1 AS bucket_index, v
    FROM bounds b, pg_catalog.generate_series(0, b.n * 64 - 1) v
    ORDER BY 1, v
)
SELECT shard.bucket_index, candidate.v AS bucket, shard.hash_min, shard.hash_max
FROM shard JOIN candidate USING (bucket_index)
"""


@dataclasses.dataclass
class CitusResult:
    schema: Result
    citus_version: str
    worker_nodes: int
    made_reference: list[str]
    buckets: int = 0
    buckets_made: bool = False
    citus_applied: list[str] = dataclasses.field(default_factory=list)
    distributed: bool = False


def check_bucket_count(buckets: int) -> int:
    """The bucket count asked for, or a MigrateError: a power of two from 1 to 1,024."""
    if isinstance(buckets, bool) or not isinstance(buckets, int) or not 1 <= buckets <= MAX_BUCKETS \
            or buckets & (buckets - 1):
        raise MigrateError(f"--buckets: must be a power of two from 1 to {MAX_BUCKETS:,}, got {buckets!r}")
    return buckets


def bucket_count(conn: psycopg.Connection) -> int:
    """The number of buckets this database has (0: none made yet)."""
    if conn.execute("SELECT to_regclass('cronbox.bucket')").fetchone()[0] is None:
        return 0
    return conn.execute("SELECT count(*) FROM cronbox.bucket").fetchone()[0]


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
    """Let the owner role and the report functions' role log in on every worker node (not on the coordinator), each node's own
    ALTER ROLE: Citus would otherwise propagate it to every node, the coordinator included, and
    a node added later gets the coordinator's NOLOGIN with the other roles (run `cronbox migrate
    --citus` again after citus_add_node). Who may connect as it stays the workers' pg_hba.conf's
    (docs/citus.md, "Set up")."""
    for role in (OWNER_ROLE, RUNNER_ROLE):
        on_each_worker(conn, f"let {role} log in on the worker nodes",
                       f"SET citus.enable_alter_role_propagation TO off; ALTER ROLE {role} LOGIN")


def on_each_worker(conn: psycopg.Connection, what: str, command: str) -> None:
    """Run a command on every worker node, each node on its own (not propagated)."""
    rows = conn.execute("SELECT nodename, nodeport, success, result FROM pg_catalog.run_command_on_workers(%s)",
                        (command,)).fetchall()
    failed = [f"{host}:{port}: {result}" for host, port, ok, result in rows if not ok]
    if failed:
        raise MigrateError(f"could not {what}: " + "; ".join(failed))


def run_id_sequence_on_workers(conn: psycopg.Connection) -> None:
    """cronbox.new_bucket_run_id(bucket_index) draws from cronbox.run_id_seq on the node it runs on
    (a delegated dispatch runs on the node holding its bucket): each worker node gets one of its
    own (Citus copies the functions, not a sequence no distributed table uses). Ids stay unique:
    a bucket is on one node at a time and its index is in the id."""
    on_each_worker(conn, "create cronbox.run_id_seq on the worker nodes",
                   "SET citus.enable_ddl_propagation TO off; CREATE SEQUENCE IF NOT EXISTS cronbox.run_id_seq;"
                   f" ALTER SEQUENCE cronbox.run_id_seq OWNER TO {OWNER_ROLE}")


def citus_root() -> Path:
    """The Citus layer's SQL: sql/citus/ (migrations, functions/<who may call>, views)."""
    return sql_root() / "citus"


def has_citus_layer(conn: psycopg.Connection) -> bool:
    """Whether `cronbox migrate --citus` has applied its layer to this database."""
    return conn.execute("SELECT to_regclass('cronbox.citus_version') IS NOT NULL").fetchone()[0]


def make_buckets(conn: psycopg.Connection, buckets: int) -> None:
    """Distribute cronbox.bucket_shard over `buckets` shards (a colocation group of its own),
    list one bucket value per shard in the reference table cronbox.bucket, put each bucket's row
    in its shard and make the bucket leases' rows: one transaction, checked before it commits
    (each value in its own shard)."""
    with conn.transaction():
        # a shard per bucket, created and then written in this transaction: one connection
        # per node, not one per shard
        conn.execute("SET LOCAL citus.multi_shard_modify_mode TO 'sequential'")
        conn.execute("SELECT pg_catalog.create_reference_table('cronbox.bucket')")
        conn.execute("SELECT pg_catalog.create_distributed_table('cronbox.bucket_shard', 'bucket',"
                     " shard_count => %s, colocate_with => 'none')", (buckets,))
        conn.execute("INSERT INTO cronbox.bucket (bucket_index, bucket, hash_min, hash_max)"
                     f" SELECT * FROM ({SHARD_VALUES}) v", {"table": "cronbox.bucket_shard"})
        found, own_shard = conn.execute(
            "SELECT count(*), count(*) FILTER (WHERE s.shardminvalue::integer = b.hash_min) FROM cronbox.bucket b"
            " JOIN pg_catalog.pg_dist_shard s ON s.shardid ="
            " pg_catalog.get_shard_id_for_distribution_column('cronbox.bucket_shard', b.bucket)").fetchone()
        if found != buckets or own_shard != buckets:
            raise MigrateError(f"could not place one bucket in each of the {buckets} shards "
                               f"({found} found, {own_shard} in their own shard)")
        conn.execute("INSERT INTO cronbox.bucket_shard (bucket) SELECT b.bucket FROM cronbox.bucket b")
        conn.execute("INSERT INTO cronbox.bucket_lease (kind, bucket) SELECT k, b.bucket"
                     " FROM cronbox.bucket b, unnest(%s::text[]) k", (list(LEASE_KINDS),))


def is_distributed(conn: psycopg.Connection) -> bool:
    """Whether the layer's migration that distributes the hot tables has been applied."""
    return conn.execute("SELECT to_regclass('cronbox.citus_version') IS NOT NULL AND EXISTS"
                        " (SELECT FROM cronbox.citus_version WHERE version = ANY (%s))",
                        (sorted(DISTRIBUTE_VERSIONS),)).fetchone()[0]


def apply_citus_layer(conn: psycopg.Connection, buckets: int | None,
                      distribute: bool = False) -> tuple[list[str], int, bool]:
    """Under the migrate lock: the buckets if not made yet, the Citus layer's pending migrations
    (each in its own transaction with its version row; those of DISTRIBUTE_VERSIONS only with
    `distribute` or once applied), then its functions and views if their digest changed, and the
    grants again (sql/grants.sql: ownership, view grants, the check that every function states its
    grants); on a distributed database the hot functions' plan setting, every time. Returns
    (migrations applied, buckets, made now)."""
    root = citus_root()
    with conn.transaction():
        conn.execute(_CITUS_BOOTSTRAP)
    done = {r[0] for r in conn.execute("SELECT version FROM cronbox.citus_version")}
    keep = distribute or bool(done & DISTRIBUTE_VERSIONS)
    known = [m for m in migrations(root) if keep or m.version not in DISTRIBUTE_VERSIONS]
    # the distribution last, once the buckets and the layer's functions (bucket_of) are there
    first = [m for m in known if m.version not in DISTRIBUTE_VERSIONS or m.version in done]
    applied = apply_migrations(conn, first, "cronbox.citus_version", "'s Citus layer")
    count, made = bucket_count(conn), False
    if count == 0:
        count, made = buckets or DEFAULT_BUCKETS, True
        make_buckets(conn, count)
        log.info("made %d buckets", count)
    files = [*code_files(root), sql_root() / "grants.sql"]
    apply_code(conn, files, code_digest(files), "cronbox.citus_code", force=bool(applied) or made)
    applied += apply_migrations(conn, known, "cronbox.citus_version", "'s Citus layer")
    if keep:
        with conn.transaction():
            conn.execute((root / "distributed_plans.sql").read_text())
            conn.execute((root / "distributed_views.sql").read_text())
    return applied, count, made


def migrate_citus(dsn: str, buckets: int | None = None, distribute: bool = False) -> CitusResult:
    """Check the coordinator and the bucket count, run the migrations, make the shared tables
    reference tables, apply the Citus layer (buckets, leases; with `distribute`, the hot tables
    distributed by bucket)."""
    if buckets is not None:
        check_bucket_count(buckets)
    with db.connect(dsn) as conn:
        version, workers = check_coordinator(conn)
        have = bucket_count(conn)
    if buckets is not None and have and buckets != have:
        raise MigrateError(f"--buckets {buckets}: this database already has {have} buckets, and the count cannot "
                           "change (every job's bucket and every run id's bucket bits would): docs/citus.md")
    schema = migrate(dsn)
    made: list[str] = []
    with db.connect(dsn) as conn:
        conn.execute("SELECT pg_catalog.pg_advisory_lock(%s)", (LOCK_KEY,))
        try:
            owner_logs_in_on_workers(conn)
            run_id_sequence_on_workers(conn)
            with conn.transaction():
                done = reference_tables(conn)
                for table in REFERENCE_TABLES:
                    if table not in done:
                        conn.execute("SELECT pg_catalog.create_reference_table(%s::regclass)", (f"cronbox.{table}",))
                        made.append(table)
            citus_applied, count, buckets_made = apply_citus_layer(conn, buckets, distribute)
            distributed = is_distributed(conn)
        finally:
            conn.execute("SELECT pg_catalog.pg_advisory_unlock(%s)", (LOCK_KEY,))
    if made:
        log.info("made reference tables: %s", ", ".join(made))
    return CitusResult(schema=schema, citus_version=version, worker_nodes=workers, made_reference=made,
                       buckets=count, buckets_made=buckets_made, citus_applied=citus_applied,
                       distributed=distributed)
