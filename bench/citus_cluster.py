"""A Citus cluster on this machine: a coordinator and worker nodes, each a private PostgreSQL
(cronbox/pgcluster.py: run as the postgres OS user, 127.0.0.1, stopped by pid) started with
`shared_preload_libraries=citus`, the extension created in database `postgres` on every node,
the coordinator registered (`citus_set_coordinator_host`) and each worker added
(`citus_add_node`). Used by the Citus test suite (tests/test_citus.py) and bench/.

Citus itself is built from the source beside the repository (../shared/vendor/citus/build.sh,
run by .ci/run when it is missing); `available()` says whether this machine's PostgreSQL has it.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from cronbox import db
from cronbox.pgcluster import FAST_SETTINGS, Cluster, PgNotFound, find_bindir

# Nodes talk to each other over TCP on 127.0.0.1 without TLS: as root the servers run as the
# postgres user with root's HOME, where libpq would try (and fail) to read root's client
# certificates. Small pools: every node shares the machine's cores.
CITUS_SETTINGS = {
    "shared_preload_libraries": "citus",
    "citus.node_conninfo": "sslmode=disable",
    "max_connections": "150",
    "citus.max_adaptive_executor_pool_size": "4",
    "citus.max_cached_conns_per_worker": "2",
    "citus.log_remote_commands": "off",
}


def available() -> str | None:
    """None when the machine's PostgreSQL has Citus installed, else the reason it cannot run."""
    try:
        bindir = find_bindir()
    except PgNotFound as exc:
        return str(exc)
    pg_config = bindir / "pg_config"
    cmd = str(pg_config) if pg_config.is_file() else shutil.which("pg_config")
    if not cmd:
        return "pg_config not found: cannot tell where PostgreSQL keeps its extensions"
    libdir = subprocess.run([cmd, "--pkglibdir"], capture_output=True, text=True, check=False).stdout.strip()
    if not (Path(libdir) / "citus.so").is_file():
        return f"Citus is not installed in {libdir} (bash ../shared/vendor/citus/build.sh builds it)"
    return None


class CitusCluster:
    """A coordinator and `workers` worker nodes under `root` (root/coordinator, root/worker1, ...)."""

    def __init__(self, root: Path, *, workers: int = 2, settings: dict[str, str] | None = None):
        self.root = Path(root)
        extra = {**FAST_SETTINGS, **CITUS_SETTINGS, **(settings or {})}
        self.coordinator = Cluster(self.root / "coordinator", settings=dict(extra))
        self.workers = [Cluster(self.root / f"worker{i + 1}", settings=dict(extra)) for i in range(workers)]

    @property
    def nodes(self) -> list[Cluster]:
        return [self.coordinator, *self.workers]

    def dsn(self, dbname: str = "postgres") -> str:
        """The coordinator's DSN: what cronbox's processes and `cronbox migrate --citus` use."""
        return self.coordinator.dsn(dbname)

    def start(self) -> str:
        """Start every node, create the extension on each, register the nodes (idempotent: a
        node already registered is left as it is). Returns the coordinator's DSN."""
        try:
            for node in self.nodes:
                node.start()
                with db.connect(node.dsn()) as conn:
                    conn.execute("CREATE EXTENSION IF NOT EXISTS citus")
            with db.connect(self.coordinator.dsn()) as conn:
                conn.execute("SELECT pg_catalog.citus_set_coordinator_host('127.0.0.1', %s)",
                             (self.coordinator.port,))
                for node in self.workers:
                    conn.execute("SELECT pg_catalog.citus_add_node('127.0.0.1', %s)", (node.port,))
        except BaseException:
            self.stop()
            raise
        return self.dsn()

    def stop_worker(self, index: int, mode: str = "fast") -> None:
        """Stop one worker node; it stays registered, and start_worker brings it back on the
        same port."""
        node = self.workers[index]
        node.settings["port"] = str(node.port)
        node.stop(mode=mode)

    def start_worker(self, index: int) -> None:
        self.workers[index].start()

    def stop(self, mode: str = "immediate") -> None:
        for node in reversed(self.nodes):
            node.stop(mode=mode)


def main(argv: list[str] | None = None) -> int:
    """`python -m bench.citus_cluster start DIR` starts a new cluster in DIR (which must not
    exist) and prints the coordinator's DSN, for `cronbox migrate --citus` and the bench
    scripts' --dsn; `python -m bench.citus_cluster stop DIR` stops it."""
    import argparse

    p = argparse.ArgumentParser(prog="python -m bench.citus_cluster", description=main.__doc__)
    p.add_argument("action", choices=("start", "stop"))
    p.add_argument("folder", type=Path)
    p.add_argument("--workers", type=int, default=2)
    args = p.parse_args(argv)
    if args.action == "stop":
        workers = len(list(args.folder.glob("worker*")))
        CitusCluster(args.folder, workers=workers).stop(mode="fast")
        return 0
    why = available()
    if why:
        print(why)
        return 1
    if args.folder.exists():
        print(f"{args.folder} exists: a cluster is started in a new folder (its nodes' ports are registered)")
        return 1
    args.folder.mkdir(parents=True)
    args.folder.chmod(0o755)
    print(CitusCluster(args.folder, workers=args.workers).start())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
