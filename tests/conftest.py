"""Test fixtures: a private PostgreSQL for the session, a template database migrated once
with the real migrator, and per test either a rolled-back transaction (`conn`) or a fresh
database cloned from the template (`fresh_dsn`). TEST_DATABASE_URL points the suite at an
existing server instead (it must allow CREATE DATABASE).

Every test connection runs with an empty search_path, so an unqualified name in SQL or in
Python fails the suite.

On Citus (`pytest -m citus`, `pytest -k citus`, or CRONBOX_TEST_CITUS=1 with any selection) the
session's server is a Citus coordinator with two worker nodes (bench/citus_cluster.py), the
template is migrated with `cronbox migrate --citus`, and the behaviour modules named in
tests/citus_support.py run there unchanged, besides the Citus suite itself (docs/citus.md).
"""

from __future__ import annotations

import itertools
import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from psycopg import sql

from cronbox import db
from cronbox.migrate import migrate
from cronbox.pgcluster import FAST_SETTINGS, Cluster

from .citus_support import (  # noqa: F401 (bucket_leases: a fixture)
    ON_CITUS_MODULES,
    ON_CITUS_SKIPS,
    ON_DISTRIBUTED_MODULES,
    ON_DISTRIBUTED_SKIPS,
    bucket_leases,
)

REPO = Path(__file__).resolve().parent.parent
TEMPLATE = f"cronbox_template_{os.getpid()}"
# On Citus, the template migrated with `cronbox migrate --citus --distribute` (the hot tables
# distributed by bucket), for the tests marked `citus_distributed`
DISTRIBUTED_TEMPLATE = f"cronbox_dtemplate_{os.getpid()}"
_counter = itertools.count()


def pytest_configure(config: pytest.Config) -> None:
    """The default `-m 'not patroni and not slow and not citus'` (pyproject addopts) gives way
    when the command line names test files or node ids, or asks for the Patroni or Citus suite
    with -k, without a -m of its own: `pytest tests/test_web_axe.py` runs that file's slow tests
    and `pytest -k patroni` / `pytest -k citus` select that suite whatever the default markers."""
    args = [str(a) for a in config.invocation_params.args]
    own_m = any(a == "-m" or (a.startswith("-m") and not a.startswith("--")) for a in args)
    named = any(a.endswith(".py") or "::" in a for a in args if not a.startswith("-"))
    keyword = config.option.keyword or ""
    asked = "patroni" in keyword or "citus" in keyword or named
    if asked and not own_m:
        config.option.markexpr = ""
    global ON_CITUS
    marks = config.option.markexpr or ""
    ON_CITUS = (os.environ.get("CRONBOX_TEST_CITUS", "") not in ("", "0") or DISTRIBUTED
                or "citus" in keyword or ("citus" in marks and "not citus" not in marks)
                or "citus_distributed" in marks.replace("not citus_distributed", ""))


ON_CITUS = False
# CRONBOX_TEST_CITUS_DISTRIBUTE=1: the Citus session (as CRONBOX_TEST_CITUS=1) with the template
# migrated with `cronbox migrate --citus --distribute`, the hot tables distributed by bucket
# (docs/citus.md, "Distributing the hot tables": what holds there and what does not yet).
DISTRIBUTED = os.environ.get("CRONBOX_TEST_CITUS_DISTRIBUTE", "") not in ("", "0")


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """On Citus, each test of a behaviour module that holds on the distributed tables
    (ON_DISTRIBUTED_MODULES) runs twice: against the template migrated with `--citus` (`[citus]`)
    and against the one migrated with `--citus --distribute` (`[distributed]`)."""
    module = metafunc.module.__name__.rsplit(".", 1)[-1] + ".py"
    if ON_CITUS and not DISTRIBUTED and module in ON_DISTRIBUTED_MODULES and "citus_layout" in metafunc.fixturenames:
        metafunc.parametrize("citus_layout", ["citus", "distributed"], indirect=True)


@pytest.fixture(autouse=True)
def citus_layout(request: pytest.FixtureRequest) -> str | None:
    """How the test's database lays out the hot tables: 'citus' (the coordinator's own),
    'distributed' (by bucket), None on plain PostgreSQL."""
    if not ON_CITUS:
        return None
    return getattr(request, "param", "distributed" if DISTRIBUTED else "citus")


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """On Citus, the behaviour modules' tests (not the slow ones) join the `citus` marker, so
    `pytest -m citus` and `pytest -k citus` run them on the coordinator, and the tests known not
    to hold there are skipped with their reason (docs/citus.md lists them). Those of the modules
    that hold on the distributed tables also run there, as `[distributed]` and marker
    `citus_distributed` (`pytest -m citus_distributed`, and `pytest -k citus` with the others)."""
    if not ON_CITUS:
        return
    for item in items:
        module = item.nodeid.split("::", 1)[0].rsplit("/", 1)[-1]
        name = item.nodeid.split("[", 1)[0].rsplit("/", 1)[-1]
        distributed = getattr(item, "callspec", None) and item.callspec.params.get("citus_layout") == "distributed"
        if module in ON_CITUS_MODULES and not item.get_closest_marker("slow"):
            item.add_marker(pytest.mark.citus_distributed if distributed else pytest.mark.citus)
        why = ON_CITUS_SKIPS.get(name) or ON_CITUS_SKIPS.get(module)
        if distributed:
            why = why or ON_DISTRIBUTED_SKIPS.get(name)
        if why:
            item.add_marker(pytest.mark.skip(reason=f"on Citus: {why}"))


def wants_distributed(request: pytest.FixtureRequest) -> bool:
    """Whether the test runs against the distributed tables without the session's template being
    distributed (the `[distributed]` copy of a behaviour test)."""
    return not DISTRIBUTED and request.node.get_closest_marker("citus_distributed") is not None


def with_db(dsn: str, dbname: str, *, empty_search_path: bool = True) -> str:
    info = psycopg.conninfo.conninfo_to_dict(dsn)
    info["dbname"] = dbname
    if empty_search_path:
        info["options"] = "-c search_path="
    return psycopg.conninfo.make_conninfo(**info)


class Server:
    """The PostgreSQL the suite runs against (private cluster unless TEST_DATABASE_URL)."""

    def __init__(self, admin_dsn: str, cluster: Cluster | None):
        self.admin_dsn = admin_dsn
        self.cluster = cluster

    def create_db(self, name: str, template: str | None = None) -> str:
        with db.connect(self.admin_dsn) as conn:
            stmt = sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name))
            if template:
                stmt += sql.SQL(" TEMPLATE {}").format(sql.Identifier(template))
            conn.execute(stmt)
        return with_db(self.admin_dsn, name)

    def drop_db(self, name: str) -> None:
        with db.connect(self.admin_dsn) as conn:
            conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))


class CitusServer(Server):
    """A Citus coordinator and its worker nodes as the session's server. A database made from a
    template is made on every node from that node's copy of the template (Citus does not
    propagate CREATE DATABASE ... TEMPLATE), so each clone's metadata, reference copies and shards
    agree across the nodes as the template's did; a database made without one is the
    coordinator's alone, without the extension: a plain PostgreSQL database."""

    def __init__(self, cluster):
        super().__init__(cluster.dsn(), cluster.coordinator)
        self.citus = cluster
        self.node_dsns = [node.dsn() for node in cluster.nodes]

    def create_db(self, name: str, template: str | None = None) -> str:
        if template is None:
            return super().create_db(name)
        for dsn in self.node_dsns:
            with db.connect(dsn) as conn:
                conn.execute(sql.SQL("CREATE DATABASE {} TEMPLATE {}").format(sql.Identifier(name),
                                                                              sql.Identifier(template)))
        return with_db(self.admin_dsn, name)

    def drop_db(self, name: str) -> None:
        # closed to new connections on every node first: a Citus maintenance daemon connecting
        # again between DROP DATABASE's end of the other sessions and its check failed the drop
        # ("is being accessed by other users")
        for dsn in self.node_dsns:
            with db.connect(dsn) as conn:
                if conn.execute("SELECT 1 FROM pg_catalog.pg_database WHERE datname = %s", (name,)).fetchone():
                    conn.execute(sql.SQL("ALTER DATABASE {} ALLOW_CONNECTIONS false").format(sql.Identifier(name)))
        for dsn in reversed(self.node_dsns):
            with db.connect(dsn) as conn:
                conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))

    def create_citus_template(self, name: str, distribute: bool = DISTRIBUTED) -> str:
        """The database on every node with the extension, the nodes registered, then
        `cronbox migrate --citus` through the coordinator, then closed to connections on every
        node (Citus keeps a maintenance daemon connected to each of its databases, and CREATE
        DATABASE ... TEMPLATE needs its template left alone)."""
        target = self.create_citus_db(name)
        from cronbox.citus import migrate_citus

        migrate_citus(target, distribute=distribute)
        self.seal(name)
        return target

    def create_citus_db(self, name: str) -> str:
        """A new database on every node with the Citus extension and the nodes registered,
        nothing of cronbox in it: its coordinator's DSN."""
        self.drop_db(name)
        for dsn in self.node_dsns:
            with db.connect(dsn) as conn:
                conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
            with db.connect(with_db(dsn, name, empty_search_path=False)) as conn:
                conn.execute("CREATE EXTENSION citus")
        target = with_db(self.admin_dsn, name)
        with db.connect(target) as conn:
            conn.execute("SELECT pg_catalog.citus_set_coordinator_host('127.0.0.1', %s)",
                         (self.citus.coordinator.port,))
            for node in self.citus.workers:
                conn.execute("SELECT pg_catalog.citus_add_node('127.0.0.1', %s)", (node.port,))
        return target

    def seal(self, name: str) -> None:
        """No connection to `name` on any node from now on, the maintenance daemons' included."""
        for dsn in self.node_dsns:
            with db.connect(dsn) as conn:
                conn.execute(sql.SQL("ALTER DATABASE {} ALLOW_CONNECTIONS false").format(sql.Identifier(name)))
        for dsn in self.node_dsns:
            with db.connect(dsn) as conn:
                conn.execute("SELECT pg_catalog.pg_terminate_backend(pid, 10000) FROM pg_catalog.pg_stat_activity"
                             " WHERE datname = %s AND pid <> pg_catalog.pg_backend_pid()", (name,))


def start_citus(tmp: Path):
    from bench.citus_cluster import CitusCluster, available

    why = available()
    if why:
        pytest.skip(f"the Citus suite needs Citus: {why}")
    cluster = CitusCluster(tmp / "citus", settings={"max_connections": "300", "max_worker_processes": "32"})
    cluster.start()
    return cluster


@pytest.fixture(scope="session")
def pg() -> Iterator[Server]:
    url = os.environ.get("TEST_DATABASE_URL")
    if url:
        yield Server(url, None)
        return
    if ON_CITUS:
        tmp = Path(tempfile.mkdtemp(prefix="cronbox-citus-"))
        os.chmod(tmp, 0o755)
        cluster = start_citus(tmp)
        try:
            yield CitusServer(cluster)
        finally:
            cluster.stop()
            subprocess.run(["rm", "-rf", str(tmp)], check=False)
        return
    tmp = Path(tempfile.mkdtemp(prefix="cronbox-test-"))
    os.chmod(tmp, 0o755)
    cluster = Cluster(tmp / "pg", settings={**FAST_SETTINGS, "max_connections": "200"})
    dsn = cluster.start()
    try:
        yield Server(dsn, cluster)
    finally:
        cluster.stop(mode="immediate")
        subprocess.run(["rm", "-rf", str(tmp)], check=False)


@pytest.fixture(scope="session")
def template_dsn(pg: Server) -> Iterator[str]:
    """A database migrated once with the real migrator; tests clone it. On Citus: with
    `cronbox migrate --citus`, on every node."""
    if isinstance(pg, CitusServer):
        yield pg.create_citus_template(TEMPLATE)
        pg.drop_db(TEMPLATE)
        return
    pg.drop_db(TEMPLATE)
    dsn = pg.create_db(TEMPLATE)
    migrate(dsn)
    yield dsn
    pg.drop_db(TEMPLATE)


@pytest.fixture(scope="session")
def distributed_template_dsn(pg: Server) -> Iterator[str]:
    """On Citus, a second template migrated with `cronbox migrate --citus --distribute`, made when
    a `[distributed]` test first needs it."""
    yield pg.create_citus_template(DISTRIBUTED_TEMPLATE, distribute=True)
    pg.drop_db(DISTRIBUTED_TEMPLATE)


def shared_clone(pg: Server, template: str, kind: str) -> Iterator[str]:
    name = f"cronbox_{kind}_{os.getpid()}"
    pg.drop_db(name)
    dsn = pg.create_db(name, template=template)
    yield dsn
    pg.drop_db(name)


@pytest.fixture(scope="session")
def shared_template_dsn(pg: Server, template_dsn: str) -> Iterator[str]:
    yield from shared_clone(pg, TEMPLATE, "shared")


@pytest.fixture(scope="session")
def shared_distributed_dsn(pg: Server, distributed_template_dsn: str) -> Iterator[str]:
    yield from shared_clone(pg, DISTRIBUTED_TEMPLATE, "dshared")


@pytest.fixture
def shared_dsn(request: pytest.FixtureRequest) -> str:
    """One clone shared by the rolled-back-transaction tests (of the distributed template for a
    `[distributed]` test)."""
    return request.getfixturevalue("shared_distributed_dsn" if wants_distributed(request) else "shared_template_dsn")


@pytest.fixture
def conn(shared_dsn: str) -> Iterator[psycopg.Connection]:
    """A connection inside a transaction that is rolled back after the test."""
    c = psycopg.connect(shared_dsn, autocommit=False, prepare_threshold=None)
    try:
        yield c
    finally:
        c.rollback()
        c.close()


@pytest.fixture
def fresh_dsn(pg: Server, request: pytest.FixtureRequest) -> Iterator[str]:
    """A fresh database cloned from the template (the distributed one for a `[distributed]`
    test), dropped after the test."""
    distributed = wants_distributed(request)
    request.getfixturevalue("distributed_template_dsn" if distributed else "template_dsn")
    name = f"cronbox_t{os.getpid()}_{next(_counter)}"
    dsn = pg.create_db(name, template=DISTRIBUTED_TEMPLATE if distributed else TEMPLATE)
    yield dsn
    pg.drop_db(name)


@pytest.fixture(scope="session")
def citus(request: pytest.FixtureRequest) -> Iterator[object]:
    """A Citus coordinator and two worker nodes on this machine (bench/citus_cluster.py), one per
    session, stopped by pid at the end: the session's server's when the session runs on Citus.
    Skipped, with the reason, where Citus is not installed (.ci/run builds it)."""
    if ON_CITUS and not os.environ.get("TEST_DATABASE_URL"):
        yield request.getfixturevalue("pg").citus
        return
    tmp = Path(tempfile.mkdtemp(prefix="cronbox-citus-"))
    os.chmod(tmp, 0o755)
    cluster = start_citus(tmp)
    try:
        yield cluster
    finally:
        cluster.stop()
        subprocess.run(["rm", "-rf", str(tmp)], check=False)


@pytest.fixture(scope="session")
def citus_db(citus) -> Iterator[tuple[str, str]]:
    """The coordinator's database after `cronbox migrate --citus` (the real command, default
    bucket count): its DSN (empty search_path, as every test connection) and the output."""
    done = cli_migrate(citus.dsn(), "--citus")
    assert done.returncode == 0, done.stderr
    yield with_db(citus.dsn(), "postgres"), done.stdout


def cli_migrate(dsn: str, *args: str) -> subprocess.CompletedProcess[str]:
    """The real `cronbox migrate` with only DATABASE_URL set."""
    return subprocess.run(cronbox_cmd("migrate", *args), env={"DATABASE_URL": dsn, "PATH": "/usr/bin:/bin"},
                          capture_output=True, text=True, timeout=300)


def cronbox_cmd(*args: str) -> list[str]:
    """The real `cronbox` command, run with this interpreter."""
    return [sys.executable, "-m", "cronbox", *args]
