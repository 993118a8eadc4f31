"""bench.stage_ab: the server time of each stage of a run, this tree's SQL functions against an
older commit's, side by side on one durable cluster, batches interleaved.

    python -m bench.stage_ab REV [--flow push|push4|push202|pull|pull2] [-n 20000] [--rounds 3] [--hold-snapshot] [--json FILE] [--quick]

Two databases on one private cluster, both migrated from this tree; in the second ("old") the
function and view files that differ from REV are replaced by REV's (`git show REV:path`, the
files as they were; the tables are this tree's in both). Where REV's migrations differ from this
tree's, the second database is migrated by REV's own sql/ tree instead (`git archive`): tables
and functions both as they were, so a migration (an index, a column) is measured too. Each round loads N one-off jobs due now in both, then calls each
stage's function in batches of 1,000 (push: dispatch, claim_outbox, ack_outbox with the
worker's answers; pull: dispatch, claim_runs, complete_runs; pull2: the same with a second
worker's batch in flight, each claim made while the batch claimed before it still runs and each
complete reporting that one, as two pull workers do; push202: dispatch, claim_outbox, ack_outbox
without answers (the worker answered 202), complete_runs of the batch acked four batches
before, so four batches of delivered runs are in flight at each claim; push4: push with four
claimed batches in flight, each ack answering the batch claimed four claims before, as the
relay's lane keeps CRONBOX_RELAY_INFLIGHT batches out, so each claim passes their leased rows),
one batch in one database then
the same batch in the other, the order alternating between batches, each call its own durable
commit. Reports per version the median over batches of each stage's call time per run, in µs,
and the difference. Both versions see the same noise at the same moment, so the difference is
steadier than either figure; `bench.sqlcost` is the figure of record for one version's cost.
With --hold-snapshot a second connection to each database holds a snapshot taken after each
round's load until the round ends: no row version that round's calls replace or delete dies to
every snapshot, so their old index entries stay alive (as under load, where some snapshot is
always a little older than the last claims), and a walk passes them again.
"""

from __future__ import annotations

import argparse
import io
import re
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path
from typing import Any

import psycopg

from bench.common import REPO, claim_outbox_sql, claim_runs_sql, cpu_seconds, emit, log, machine
from bench.database import ADD_JOB_ROWS, DURABLE_SETTINGS
from cronbox import db
from cronbox.migrate import migrate
from cronbox.pgcluster import Cluster

BATCH = 1000
STAGES = {"push": ("dispatch", "claim", "ack"), "push4": ("dispatch", "claim", "ack"), "pull": ("dispatch", "claim_runs", "complete"),
          "pull2": ("dispatch", "claim_runs", "complete"), "push202": ("dispatch", "claim", "ack202", "complete")}
AHEAD = {"push": 0, "push4": 4, "pull": 0, "pull2": 1, "push202": 4}  # batches in flight before the first timed one


def git(*args: str) -> str:
    return subprocess.run(["git", *args], cwd=REPO, capture_output=True, text=True, check=True).stdout


def old_files(rev: str) -> dict[str, str]:
    """REV's version of every function and view file that differs from this tree (the
    migrations being the same)."""
    changed = git("diff", "--name-only", "--diff-filter=M", rev, "--", "sql/functions", "sql/views").split()
    return {path: git("show", f"{rev}:{path}") for path in changed}


def migrate_as_of(dsn: str, rev: str) -> list[str]:
    """Migrate the empty database at dsn to REV's SQL. Where REV's migrations are this tree's,
    this tree's migrations, then REV's version of each function and view file that differs,
    this tree's functions of those names dropped first (every overload: a signature this tree
    changed would otherwise stay beside REV's, and a call matching both, one by its defaults,
    would be ambiguous); returns those files. Otherwise REV's own sql/ tree whole (its
    migrations, functions and grants, extracted with `git archive`: tables as they were);
    returns ["sql/"]."""
    if git("diff", "--name-only", rev, "--", "sql/migrations").strip():
        archive = subprocess.run(["git", "archive", rev, "sql"], cwd=REPO, capture_output=True, check=True)
        with tempfile.TemporaryDirectory() as tree:
            with tarfile.open(fileobj=io.BytesIO(archive.stdout)) as tar:
                tar.extractall(tree)
            migrate(dsn, Path(tree) / "sql")
        return ["sql/"]
    files = old_files(rev)
    migrate(dsn)
    with psycopg.connect(dsn, autocommit=True) as conn:
        names = sorted({m.lower() for text in files.values()
                        for m in re.findall(r"CREATE OR REPLACE FUNCTION cronbox\.(\w+)\(", text)})
        procs = conn.execute(
            "SELECT p.oid::regprocedure::text FROM pg_catalog.pg_proc p"
            " WHERE p.pronamespace = 'cronbox'::regnamespace AND p.proname = ANY (%s)", (names,)).fetchall() if names else []
        for (proc,) in procs:
            try:
                conn.execute(f"DROP FUNCTION {proc}")
            except psycopg.errors.DependentObjectsStillExist:
                pass  # a policy or a default uses it (cronbox.caller()): replaced in place below
        for text in files.values():
            conn.execute(text)
    return sorted(files)


def load(conn: psycopg.Connection, n: int) -> None:
    for table in ("outbox", "run", "job_future", "job"):
        conn.execute(f"DELETE FROM cronbox.{table}")
    conn.execute("INSERT INTO cronbox.job (name, kind, at, finished_at, overlap) "
                 "SELECT 'ab-' || i, 'at', now(), now(), 'allow' FROM generate_series(1, %s) i", (n,))
    conn.execute(ADD_JOB_ROWS)
    conn.execute("INSERT INTO cronbox.job_future (job_id, fire_at, due_at) SELECT job_id, at, now() FROM cronbox.job")
    conn.execute("VACUUM ANALYZE")
    conn.execute("CHECKPOINT")


def stage_calls(conn: psycopg.Connection, flow: str) -> list[Any]:
    """One batch of each stage as callables, the later ones fed by the earlier ones' output."""
    state: dict[str, list[int]] = {}

    def dispatch() -> int:
        return conn.execute("SELECT dispatched FROM cronbox.dispatch(%s)", (BATCH,)).fetchone()[0]

    push_sql = claim_outbox_sql(conn, "ab")

    def claim() -> int:  # the batches claimed and not yet acked, oldest first
        state.setdefault("claimed", []).append([r[0] for r in conn.execute(push_sql, (BATCH,))])
        return len(state["claimed"][-1])

    # The worker's answers as the relay sends them: one plain success for every run where the
    # version takes it (an object), else one answer per run (the relay before it).
    try:
        conn.execute("SELECT cronbox.ack_outbox('ab', '{}', %s)", (db.Jsonb({"state": "succeeded"}),))
        one_answer = True
    except psycopg.errors.InvalidParameterValue:
        one_answer = False

    def ack() -> int:
        ids = state["claimed"].pop(0)
        answers = db.Jsonb({"state": "succeeded"} if one_answer else [{"outbox_id": i, "state": "succeeded"} for i in ids])
        conn.execute("SELECT cronbox.ack_outbox('ab', %s, %s)", (ids, answers))
        return len(ids)

    def ack202() -> int:  # the worker answered 202: delivered, reported later (complete)
        ids = state["claimed"].pop(0)
        conn.execute("SELECT cronbox.ack_outbox('ab', %s)", (ids,))
        state.setdefault("pending", []).append(ids)
        return len(ids)

    pull_sql = claim_runs_sql(conn) if "claim_runs" in STAGES[flow] else ""

    def claim_runs() -> int:
        state.setdefault("pending", []).append([r[0] for r in conn.execute(pull_sql, ("default", "ab", BATCH))])
        return len(state["pending"][-1])

    def complete() -> int:  # the oldest batch claimed (pull2: the one claimed before the last)
        ids = state["pending"].pop(0)
        conn.execute("SELECT count(*) FROM cronbox.complete_runs(%s)", (ids,))
        return len(ids)

    calls = {"dispatch": dispatch, "claim": claim, "ack": ack, "ack202": ack202, "claim_runs": claim_runs,
             "complete": complete}
    return [calls[s] for s in STAGES[flow]]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("rev", help="the older commit (its function and view files)")
    p.add_argument("--flow", choices=sorted(STAGES), default="push")
    p.add_argument("-n", "--runs", type=int, default=20_000)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--json", dest="json_out", type=Path, help="write the report here (default: stdout)")
    p.add_argument("--quick", action="store_true", help="2,000 runs, one round (the test suite)")
    p.add_argument("--hold-snapshot", action="store_true",
                   help="a snapshot taken after each round's load held until the round ends (old row versions stay alive)")
    args = p.parse_args(argv)
    if args.quick:
        args.runs, args.rounds = 2_000, 1
    n = args.runs - args.runs % BATCH
    if n // BATCH <= AHEAD[args.flow]:
        raise SystemExit(f"--flow {args.flow} keeps {AHEAD[args.flow]} batches in flight: -n must be more than "
                         f"{AHEAD[args.flow] * BATCH}")
    folder = Path(tempfile.mkdtemp(prefix="cronbox-bench-stage-ab-"))
    cluster = Cluster(folder / "pg", settings=DURABLE_SETTINGS)
    report: dict[str, Any] = {"bench": "stage_ab", "command": "python -m bench.stage_ab " + " ".join(argv or sys.argv[1:]),
                              "quick": args.quick, "started_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
                              "machine": machine(), "durable": True, "rev": args.rev,
                              "head": git("rev-parse", "--short", "HEAD").strip(), "dirty": bool(git("status", "--porcelain", "sql")),
                              "old_files": [], "flow": args.flow, "n": n, "rounds": args.rounds,
                              "hold_snapshot": args.hold_snapshot}
    try:
        cluster.init()
        dsn = cluster.start()
        with psycopg.connect(dsn, autocommit=True) as c:
            for name in ("new", "old"):
                c.execute(f"CREATE DATABASE {name}")
        dsns = {name: dsn.rsplit("/", 1)[0] + "/" + name for name in ("new", "old")}
        migrate(dsns["new"])
        report["old_files"] = migrate_as_of(dsns["old"], args.rev)
        conns = {name: psycopg.connect(d, autocommit=True) for name, d in dsns.items()}
        per_run: dict[str, dict[str, list[float]]] = {v: {s: [] for s in STAGES[args.flow]} for v in conns}
        pids = {v: conn.execute("SELECT pg_backend_pid()").fetchone()[0] for v, conn in conns.items()}
        cpu: dict[str, dict[str, float]] = {v: {s: 0.0 for s in STAGES[args.flow]} for v in conns}
        for r in range(args.rounds):
            log(f"round {r + 1}/{args.rounds}: {n} runs, {args.flow}")
            for conn in conns.values():
                load(conn, n)
            holders = []
            if args.hold_snapshot:
                for d in dsns.values():
                    holders.append(psycopg.connect(d, autocommit=False))
                    holders[-1].execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
                    holders[-1].execute("SELECT count(*) FROM cronbox.outbox")
            calls = {v: stage_calls(conn, args.flow) for v, conn in conns.items()}
            for _ in range(AHEAD[args.flow]):  # batches in flight before the first timed claim
                for stages in calls.values():
                    for call in stages[:-1]:  # all but the report
                        call()
            for k in range(n // BATCH - AHEAD[args.flow]):
                for v in (("new", "old") if (r + k) % 2 == 0 else ("old", "new")):
                    for stage, call in zip(STAGES[args.flow], calls[v]):
                        c0 = cpu_seconds(pids[v])
                        t = time.perf_counter()
                        done = call()
                        cpu[v][stage] += cpu_seconds(pids[v]) - c0
                        if done != BATCH:
                            raise SystemExit(f"{v} {stage}: {done} runs in a batch of {BATCH}: the setup did not hold")
                        per_run[v][stage].append((time.perf_counter() - t) / BATCH)
            for _ in range(AHEAD[args.flow]):  # the batches still in flight reported
                for stages in calls.values():
                    stages[-1]()
            for h in holders:
                h.close()
            for v, conn in conns.items():
                states = conn.execute("SELECT state, count(*) FROM cronbox.runs GROUP BY state").fetchall()
                if states != [("succeeded", n)]:
                    raise SystemExit(f"{v}: runs ended {states}, not {n} succeeded")
        medians = {v: {s: round(1e6 * statistics.median(x), 1) for s, x in st.items()} for v, st in per_run.items()}
        for m in medians.values():
            m["total"] = round(sum(m.values()), 1)
        report["us_per_run"] = medians
        # backend CPU (utime + stime from /proc, 10 ms ticks) summed over every batch, per run:
        # moves far less with the machine's load than the call time does
        runs = (n - BATCH * AHEAD[args.flow]) * args.rounds  # the timed batches' runs
        cpu_per_run = {v: {s: round(1e6 * x / runs, 1) for s, x in st.items()} for v, st in cpu.items()}
        for m in cpu_per_run.values():
            m["total"] = round(sum(m.values()), 1)
        report["cpu_us_per_run"] = cpu_per_run
        report["cpu_new_to_old"] = {s: round(cpu_per_run["new"][s] / cpu_per_run["old"][s], 3)
                                    if cpu_per_run["old"][s] else None for s in cpu_per_run["new"]}
        report["new_minus_old"] = {s: round(medians["new"][s] - medians["old"][s], 1) for s in medians["new"]}
    finally:
        cluster.stop()
        shutil.rmtree(folder, ignore_errors=True)  # the private cluster's data: nothing to keep
    summary = [f"stage_ab: {args.flow}{', snapshot held' if args.hold_snapshot else ''}, {n} runs x {args.rounds} rounds, this tree vs {args.rev} "
               f"({'its own sql/: the migrations differ' if report['old_files'] == ['sql/'] else str(len(report['old_files'])) + ' function/view files differ'}), µs of server call time per run (median over batches)"]
    for v in ("new", "old"):
        summary.append(f"  {v:4} " + "  ".join(f"{s} {x}" for s, x in report["us_per_run"][v].items()))
    summary.append("  new - old " + "  ".join(f"{s} {x:+}" for s, x in report["new_minus_old"].items()))
    summary.append("  backend CPU, µs per run (all batches):")
    for v in ("new", "old"):
        summary.append(f"  {v:4} " + "  ".join(f"{s} {x}" for s, x in report["cpu_us_per_run"][v].items()))
    summary.append("  new / old " + "  ".join(f"{s} {x}" for s, x in report["cpu_new_to_old"].items()))
    emit(args, report, summary)
    return 0


if __name__ == "__main__":
    sys.exit(main())
