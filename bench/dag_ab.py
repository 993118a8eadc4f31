"""bench.dag_ab: the cost of the dependency cycle check on a large DAG, this tree's SQL
functions against an older commit's, side by side on one durable cluster, calls interleaved.

    python -m bench.dag_ab REV [--chain 1000] [--fan 2000] [--rounds 5] [--json FILE]

Two databases on one private cluster (bench.stage_ab's migrate_as_of: the second one has REV's
function files). Each holds the same DAG, written as rows (a schedule() per edge would itself
check for cycles, quadratic in the chain): a chain of CHAIN jobs, each gated on the one before
it (cronbox.job_dependency); a fan of FAN after-jobs, each listing the chain's last job by name
(cronbox.job.after and cronbox.job_after_edge); a top job gated on every job of the fan. Per round, in each database
in turn (the order alternating), timed from the client, one call each of:

    walk     find_dependency_cycle(new job, [top]): no cycle, every job of the DAG reached
    cycle    find_dependency_cycle(first of the chain, [top]): the cycle found and named
             (chain + 3 jobs, c1 named twice)
    add      add_dependency_at(new job, top) in a transaction rolled back: the whole call

Reports per version the median over rounds, in ms, and the ratio new/old.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import psycopg

from bench.common import emit, log, machine
from bench.database import ADD_JOB_ROWS, DURABLE_SETTINGS
from bench.stage_ab import git, migrate_as_of
from cronbox import db
from cronbox.migrate import migrate
from cronbox.pgcluster import Cluster


def load(conn: psycopg.Connection, chain: int, fan: int) -> None:
    """The DAG as rows: chain c1 <- c2 <- ... (gates), fan f1..fN after cN, top gated on each f."""
    conn.execute("INSERT INTO cronbox.job (name, kind, at, finished_at) "
                 "SELECT n, 'at', now() + interval '1 year', NULL FROM ("
                 " SELECT 'c' || i AS n FROM generate_series(1, %s) i UNION ALL"
                 " SELECT 'f' || i FROM generate_series(1, %s) i UNION ALL"
                 " SELECT 'top' UNION ALL SELECT 'new') s", (chain, fan))
    conn.execute(ADD_JOB_ROWS)
    ids = dict(conn.execute("SELECT name, job_id FROM cronbox.job").fetchall())
    gates = [(ids[f"c{i}"], ids[f"c{i - 1}"]) for i in range(2, chain + 1)]
    gates += [(ids["top"], ids[f"f{i}"]) for i in range(1, fan + 1)]
    with conn.cursor() as cur:
        cur.executemany("INSERT INTO cronbox.job_dependency (job_id, upstream_id, created_at, bucket)"
                        " VALUES (%s, %s, now(), 0)", gates)
    conn.execute("UPDATE cronbox.job SET after = ARRAY[%s] WHERE name LIKE 'f%%'", (f"c{chain}",))
    conn.execute("INSERT INTO cronbox.job_after_edge (upstream, job_id, bucket) "
                 "SELECT %s, job_id, 0 FROM cronbox.job WHERE name LIKE 'f%%'", (f"c{chain}",))
    conn.execute("VACUUM ANALYZE")


def calls(conn: psycopg.Connection, chain: int) -> dict[str, Callable[[], object]]:
    ids = dict(conn.execute("SELECT name, job_id FROM cronbox.job WHERE name IN ('c1', 'top', 'new')").fetchall())

    def walk() -> object:
        return conn.execute("SELECT cronbox.find_dependency_cycle(%s, %s)", (ids["new"], [ids["top"]])).fetchone()[0]

    def cycle() -> object:
        found = conn.execute("SELECT cronbox.find_dependency_cycle(%s, %s)", (ids["c1"], [ids["top"]])).fetchone()[0]
        assert found and f"{chain - 6} more" in found, found  # c1, top, a fan job, c1000 .. c1
        return found

    def add() -> object:
        with conn.transaction(force_rollback=True):
            return conn.execute("SELECT cronbox.add_dependency_at('new', 'top')").fetchone()[0]

    return {"walk": walk, "cycle": cycle, "add": add}


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("rev")
    p.add_argument("--chain", type=int, default=1000)
    p.add_argument("--fan", type=int, default=2000)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--json", dest="json_out")
    args = p.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="cronbox-dag-ab-") as tmp:
        Path(tmp).chmod(0o755)
        cluster = Cluster(Path(tmp) / "pg", settings=dict(DURABLE_SETTINGS))
        admin = cluster.start()
        try:
            with db.connect(admin) as conn:
                conn.execute("CREATE DATABASE new")
                conn.execute("CREATE DATABASE old")
            migrate(cluster.dsn("new"))
            replaced = migrate_as_of(cluster.dsn("old"), args.rev)
            log(f"old: {args.rev}: {replaced}")
            conns = {v: psycopg.connect(cluster.dsn(v), autocommit=True) for v in ("new", "old")}
            for conn in conns.values():
                load(conn, args.chain, args.fan)
            fns = {v: calls(c, args.chain) for v, c in conns.items()}
            times: dict[str, dict[str, list[float]]] = {v: {k: [] for k in fns[v]} for v in fns}
            for r in range(args.rounds):
                order = ("new", "old") if r % 2 == 0 else ("old", "new")
                for name in fns["new"]:
                    for v in order:
                        t0 = time.perf_counter()
                        fns[v][name]()
                        times[v][name].append((time.perf_counter() - t0) * 1000)
                log(f"round {r + 1}: " + ", ".join(f"{k} {times['new'][k][-1]:.1f}/{times['old'][k][-1]:.1f} ms"
                                                   for k in fns["new"]))
            for conn in conns.values():
                conn.close()
        finally:
            cluster.stop()
    medians = {v: {k: statistics.median(t) for k, t in ts.items()} for v, ts in times.items()}
    report = {
        "rev": args.rev, "head": git("rev-parse", "--short", "HEAD").strip(), "chain": args.chain, "fan": args.fan,
        "rounds": args.rounds, "machine": machine(), "ms": times, "median_ms": medians,
        "ratio_new_old": {k: medians["new"][k] / medians["old"][k] for k in medians["new"]},
    }
    emit(args, report, [f"{k:6} new {medians['new'][k]:9.1f} ms   old {medians['old'][k]:9.1f} ms"
                        f"   new/old {report['ratio_new_old'][k]:.2f}" for k in medians["new"]])


if __name__ == "__main__":
    main()
