"""The SQL cost of each stage of a run, one backend, no Python pipeline in the way.

N one-off jobs due now; then, in one connection with autocommit (a durable commit per call,
as the processes do), each stage's function in batches until all N runs passed it. Four flows:

    push         dispatch -> claim (claim_outbox) -> ack (ack_outbox with the worker's answer)
    push_report  dispatch -> claim -> ack (delivered; the worker answered 202) -> complete (complete_runs)
    report_one   dispatch -> claim -> ack (delivered) -> complete_one: complete_run once per run, a
                 batch of such calls in one statement (no commit between them: the server time of
                 one report, as a worker reporting run by run pays it, less its commit)
    pull         dispatch -> claim_runs -> complete (complete_runs)
    fold         (every cronbox flow, last) the poller's fold of the job statistics that dispatch and
                 the reports left off the hot path (cronbox.fold_job_stats until none is left), per run
    raw          the bare row work of the data flow, no cronbox function: bench/pgbench/raw_*.sql
                 (futures -> run + outbox; outbox rows deleted, runs delivered; runs succeeded),
                 with no job statistics, no lease, no policy, no row security: the floor of the
                 server's cost per run for a design that writes a run and an outbox row at dispatch
    raw_one_row  the bare row work of the one-row-in-flight flow (docs/architecture.md, "One row in
                 flight"), no cronbox function: bench/pgbench/raw_one_row_*.sql (futures -> one outbox
                 row carrying the run; the row leased; on the final report the row deleted and the
                 history row inserted once, succeeded): the floor of that design, push and pull alike

Per stage and in total, per run: the server time (median over batches), the WAL written
(exact: LSN distance, split into record bytes and full-page images), the WAL records by kind
(pg_walinspect: heap inserts, updates, HOT updates, deletes, row locks, and B-tree entries
inserted: every index entry a stage adds), and the row writes per table (pg_stat_user_tables:
inserts, updates, HOT updates, deletes; partitions counted under their root), and the WAL bytes
by relation (each record counted under the table or index of its first block). A CHECKPOINT
starts each flow, so full-page images are those of a first touch after a checkpoint, as in
production once per checkpoint interval.

This isolates the server's share: a regression in a function's plan shows here as a jump in one
stage, a change of the write path as a change in its rows, index entries and WAL.

`--history-days N` first creates the run partitions of the N days before yesterday (empty), as
a deployment that keeps N days of history has them: a kept plan on the run table locks every
partition each time it runs, so a call's fixed cost grows with them.

`--after-jobs N` first schedules N pipelines of two jobs (an upstream every day and an after-job
listing it), never fired: a deployment with DAGs beside the measured runs, whose jobs no after-job
lists (what dispatch and the finishing calls read to find the after-jobs must not grow with them).

    python -m bench.sqlcost                 # 20,000 runs, batch 1,000, 3 repetitions, every flow
    python -m bench.sqlcost --flows pull --quick
    python -m bench.sqlcost --flows push --history-days 30    # as with the default retention
    python -m bench.sqlcost --flows pull --after-jobs 10000   # beside 10,000 after-jobs
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections import defaultdict
from collections.abc import Callable
from typing import Any

from bench.common import REPO, Database, base_report, claim_outbox_sql, claim_runs_sql, cpu_seconds, emit, log, parse_args
from bench.pipeline import load
from cronbox import db

FLOWS: dict[str, tuple[str, ...]] = {
    "push": ("dispatch", "claim", "ack", "fold"),
    "push_report": ("dispatch", "claim", "ack", "complete", "fold"),
    "report_one": ("dispatch", "claim", "ack", "complete_one", "fold"),
    "pull": ("dispatch", "claim_runs", "complete", "fold"),
    "raw": ("dispatch", "deliver", "complete"),
    "raw_one_row": ("dispatch", "claim", "finish"),
}
RAW_FLOWS = ("raw", "raw_one_row")
# pg_walinspect record kinds worth naming (per_record => true gives "Rmgr/RECORD").
HEAP_KINDS = {"Heap/INSERT": "heap_insert", "Heap2/MULTI_INSERT": "heap_multi_insert",
              "Heap/UPDATE": "heap_update", "Heap/HOT_UPDATE": "heap_hot_update",
              "Heap/DELETE": "heap_delete", "Heap/LOCK": "heap_lock",
              "Heap2/PRUNE": "heap_prune"}
BTREE_INSERTS = ("Btree/INSERT_LEAF", "Btree/INSERT_POST", "Btree/SPLIT_L", "Btree/SPLIT_R")


def lsn(conn) -> str:
    return conn.execute("SELECT pg_current_wal_lsn()::text").fetchone()[0]


def table_writes(conn) -> dict[str, dict[str, int]]:
    """Cumulative row writes of the cronbox tables (partitions under their root)."""
    rows = conn.execute(
        "SELECT coalesce(pg_partition_root(s.relid), s.relid)::regclass::text, "
        "       sum(n_tup_ins), sum(n_tup_upd), sum(n_tup_hot_upd), sum(n_tup_del) "
        "FROM pg_stat_user_tables s WHERE s.schemaname IN ('cronbox', 'cronbox_bench') GROUP BY 1").fetchall()
    return {name: {"ins": int(i), "upd": int(u), "hot": int(h), "del": int(d)} for name, i, u, h, d in rows}


class Meter:
    """Times one connection's calls and remembers their WAL ranges and row writes per stage."""

    def __init__(self, conn, database: Database | None = None, statements: bool = False) -> None:
        self.conn = conn
        self.pid = conn.execute("SELECT pg_backend_pid()").fetchone()[0]
        self.database = database
        self.statements = statements
        self.top: dict[str, list[dict[str, Any]]] = {}
        self.times: dict[str, list[float]] = defaultdict(list)
        self.cpu: dict[str, float] = defaultdict(float)
        self.ranges: dict[str, list[tuple[str, str]]] = defaultdict(list)
        self.rows: dict[str, dict[str, dict[str, int]]] = defaultdict(lambda: defaultdict(lambda: defaultdict(int)))
        self.runs: dict[str, int] = defaultdict(int)

    def __call__(self, stage: str, call: Callable[[], int]) -> int:
        conn = self.conn
        if self.statements and stage not in self.top and self.database is not None:
            self.collect()
            self.database.reset_statements()
            self.top[stage] = []
        conn.execute("SELECT pg_stat_force_next_flush()")  # this backend's counters, flushed when idle
        before = table_writes(conn)
        start = lsn(conn)
        cpu = cpu_seconds(self.pid)
        t = time.perf_counter()
        n = call()
        elapsed = time.perf_counter() - t
        self.cpu[stage] += cpu_seconds(self.pid) - cpu
        end = lsn(conn)
        conn.execute("SELECT pg_stat_force_next_flush()")
        after = table_writes(conn)
        if n:
            self.times[stage].append(elapsed / n)
            self.ranges[stage].append((start, end))
            self.runs[stage] += n
        for table, counts in after.items():
            for key, value in counts.items():
                delta = value - before.get(table, {}).get(key, 0)
                if delta:
                    self.rows[stage][table][key] += delta
        return n

    def collect(self) -> None:
        """The statements of the stage begun last (pg_stat_statements, track=all), heaviest first."""
        if self.statements and self.top and self.database is not None:
            last = list(self.top)[-1]
            if not self.top[last]:
                self.top[last] = [s for s in self.database.top_statements(25)
                                  if "pg_stat" not in s.get("query", "") and "pg_current_wal" not in s.get("query", "")][:15]

    def wal(self, stage: str) -> dict[str, float]:
        """WAL of the stage's calls: bytes (records, full-page images) and records by kind."""
        conn = self.conn
        last = max(end for _, end in self.ranges[stage])
        deadline = time.monotonic() + 30
        while conn.execute("SELECT pg_current_wal_flush_lsn() < %s::pg_lsn", (last,)).fetchone()[0]:
            if time.monotonic() > deadline:  # asynchronous commit: the WAL writer flushes soon
                raise SystemExit("WAL not flushed within 30 s")
            time.sleep(0.05)
        totals: dict[str, float] = defaultdict(float)
        for start, end in self.ranges[stage]:
            if start == end:
                continue
            for kind, count, record, fpi in conn.execute(
                    "SELECT \"resource_manager/record_type\", count, record_size, fpi_size "
                    "FROM pg_get_wal_stats(%s::pg_lsn, %s::pg_lsn, true)", (start, end)):
                totals["wal_records"] += count
                totals["wal_record_bytes"] += record
                totals["wal_fpi_bytes"] += fpi
                if kind in HEAP_KINDS:
                    totals[HEAP_KINDS[kind]] += count
                if kind in BTREE_INSERTS:
                    totals["btree_entries"] += count
        return totals

    def wal_by_relation(self, stage: str, *, by_record: bool = False) -> dict[str, float]:
        """WAL bytes (whole records, full-page images included; and "<relation> (FPI)": of which
        full-page images) of the stage's calls by the relation of each record's first block (a table, an index, a partition under its own name); records
        without a block (commits) as "(no block)". by_record: by relation and record kind
        ("run_20261125 Heap/HOT_UPDATE"), which tells a row lock from an update."""
        kind = " || ' ' || w.resource_manager || '/' || w.record_type" if by_record else ""
        totals: dict[str, float] = defaultdict(float)
        for start, end in self.ranges[stage]:
            if start == end:
                continue
            for rel, size, fpi in self.conn.execute(
                    "SELECT coalesce(pg_filenode_relation(CASE WHEN m[1]::oid = 1663 THEN 0 ELSE m[1]::oid END, "
                    "m[3]::oid)::regclass::text, CASE WHEN m IS NULL THEN '(no block)' ELSE '(other)' END)" + kind + ", "
                    "sum(w.record_length), sum(w.fpi_length) "
                    "FROM pg_get_wal_records_info(%s::pg_lsn, %s::pg_lsn) w "
                    "LEFT JOIN LATERAL regexp_match(w.block_ref, 'rel (\\d+)/(\\d+)/(\\d+)') m ON true "
                    "GROUP BY 1", (start, end)):
                totals[rel.removeprefix("cronbox.")] += float(size)
                totals[rel.removeprefix("cronbox.") + " (FPI)"] += float(fpi)
        return totals


def run_flow(database: Database, flow: str, n: int, batch: int, statements: bool = False,
             after_jobs: int = 0) -> dict[str, Any]:
    load(database, n, None)
    with database.connect() as conn:
        if after_jobs:  # after the load: its futures are one per job it finds
            conn.execute("SELECT count(cronbox.schedule('dag/up' || k, every => '1 day')), "
                         "count(cronbox.schedule('dag/after' || k, after => ARRAY['dag/up' || k])) "
                         "FROM generate_series(1, %s) AS k", (after_jobs,))
        conn.execute("CREATE EXTENSION IF NOT EXISTS pg_walinspect")
        setup = REPO / "bench" / "pgbench" / f"{flow}_setup.sql"
        if setup.exists():
            conn.execute(setup.read_text())
        conn.execute("VACUUM ANALYZE cronbox.job")
        conn.execute("VACUUM ANALYZE cronbox.job_future")
        conn.execute("CHECKPOINT")
        meter = Meter(conn, database, statements)
        stages = FLOWS[flow]
        if flow not in RAW_FLOWS:
            drain(meter, "dispatch", n, lambda: conn.execute(
                "SELECT dispatched FROM cronbox.dispatch(%s)", (batch,)).fetchone()[0])
        if flow in RAW_FLOWS:
            for stage in stages:
                sql = (REPO / "bench" / "pgbench" / f"{flow}_{stage}.sql").read_text().replace(":batch", str(int(batch)))
                drain(meter, stage, n, lambda sql=sql: conn.execute(sql).rowcount)
        elif flow == "pull":
            claimed: list[int] = []
            pull_sql = claim_runs_sql(conn)

            def claim_runs() -> int:
                ids = [r[0] for r in conn.execute(pull_sql, ("default", "sqlcost", batch))]
                claimed.extend(ids)
                return len(ids)
            drain(meter, "claim_runs", n, claim_runs)
            complete_in_batches(meter, conn, claimed, batch)
        else:
            claimed_rows: list[tuple[int, int]] = []
            push_sql = claim_outbox_sql(conn, "sqlcost")

            def claim() -> int:
                rows = conn.execute(push_sql, (batch,)).fetchall()
                claimed_rows.extend(rows)
                return len(rows)
            drain(meter, "claim", n, claim)
            answer = flow == "push"
            for i in range(0, len(claimed_rows), batch):
                chunk = claimed_rows[i:i + batch]
                ids = [o for o, _ in chunk]
                # as the relay sends it when every worker answered a plain success: one answer for all
                outcomes = db.Jsonb({"state": "succeeded"}) if answer else None
                meter("ack", lambda: conn.execute(
                    "SELECT cronbox.ack_outbox('sqlcost', %s, %s)", (ids, outcomes)).fetchone()[0])
            if flow == "report_one":
                run_ids = [r for _, r in claimed_rows]
                for i in range(0, len(run_ids), batch):
                    chunk = run_ids[i:i + batch]
                    meter("complete_one", lambda: conn.execute(
                        "SELECT count(*) FROM unnest(%s::bigint[]) AS u(id) "
                        "WHERE cronbox.complete_run(u.id) = 'succeeded'", (chunk,)).fetchone()[0])
            elif not answer:
                complete_in_batches(meter, conn, [r for _, r in claimed_rows], batch)
        if flow not in RAW_FLOWS:
            def fold() -> int:
                while conn.execute("SELECT cronbox.fold_job_stats(10000)").fetchone()[0]:
                    pass
                return n
            meter("fold", fold)
        meter.collect()
        ok = conn.execute("SELECT count(*) FROM cronbox.runs WHERE state = 'succeeded'").fetchone()[0]
        left = conn.execute("SELECT (SELECT count(*) FROM cronbox.outbox) + (SELECT count(*) FROM cronbox.job_future)"
                            " + (SELECT count(*) FROM cronbox.job_stat_change)").fetchone()[0]
        if flow == "raw_one_row":
            left += conn.execute("SELECT count(*) FROM cronbox_bench.outbox").fetchone()[0]
        per_stage = {}
        for stage in stages:
            runs = meter.runs[stage] or 1
            wal = meter.wal(stage)
            per_stage[stage] = {
                "runs": meter.runs[stage],
                "us_per_run": round(statistics.median(meter.times[stage]) * 1e6, 1),
                "cpu_us_per_run": round(meter.cpu[stage] / runs * 1e6, 1),
                "wal_bytes_per_run": round((wal["wal_record_bytes"] + wal["wal_fpi_bytes"]) / runs, 1),
                "wal_record_bytes_per_run": round(wal["wal_record_bytes"] / runs, 1),
                "wal_fpi_bytes_per_run": round(wal["wal_fpi_bytes"] / runs, 1),
                "wal_records_per_run": round(wal["wal_records"] / runs, 2),
                "btree_entries_per_run": round(wal["btree_entries"] / runs, 2),
                "heap_records_per_run": {k: round(wal[k] / runs, 2) for k in HEAP_KINDS.values() if wal.get(k)},
                "row_writes_per_run": {t: {k: round(v / runs, 2) for k, v in c.items()}
                                       for t, c in sorted(meter.rows[stage].items())},
                "wal_bytes_by_relation_per_run": per_run(meter.wal_by_relation(stage), runs),
                "wal_bytes_by_relation_and_record_per_run": per_run(meter.wal_by_relation(stage, by_record=True), runs),
            }
        if statements:
            for stage in stages:
                per_stage[stage]["statements"] = meter.top.get(stage, [])
    total = {key: round(sum(s[key] for s in per_stage.values()), 2)
             for key in ("us_per_run", "cpu_us_per_run", "wal_bytes_per_run", "wal_record_bytes_per_run", "wal_fpi_bytes_per_run",
                         "wal_records_per_run", "btree_entries_per_run")}
    total["row_writes_per_run"] = round(sum(v for s in per_stage.values() for c in s["row_writes_per_run"].values()
                                            for v in c.values()), 2)
    return {"stages": per_stage, "total": total, "succeeded": ok, "left_in_queue": left,
            "complete": ok == n and left == 0 and all(per_stage[s]["runs"] == n for s in stages)}


def per_run(totals: dict[str, float], runs: int) -> dict[str, float]:
    """Bytes per run, largest first, those of at least a byte."""
    return {k: round(b / runs, 1) for k, b in sorted(totals.items(), key=lambda kv: -kv[1]) if b / runs >= 1}


def drain(meter: Meter, stage: str, n: int, call: Callable[[], int]) -> None:
    done = 0
    while done < n:
        got = meter(stage, call)
        if got == 0:
            raise SystemExit(f"{stage} stalled at {done} of {n}: the setup did not hold")
        done += got


def complete_in_batches(meter: Meter, conn, run_ids: list[int], batch: int) -> None:
    for i in range(0, len(run_ids), batch):
        chunk = run_ids[i:i + batch]
        meter("complete", lambda: conn.execute(
            "SELECT count(*) FROM cronbox.complete_runs(%s::bigint[]) WHERE verdict = 'finished'",
            (chunk,)).fetchone()[0])


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description="cronbox: server cost per run of each stage (time, WAL, rows, index entries)")
    p.add_argument("-n", "--runs", type=int, help="runs per repetition (default 20,000; quick 2,000)")
    p.add_argument("--batch", type=int, default=1000, help="batch size of every stage")
    p.add_argument("--reps", type=int, help="repetitions (default 3; quick 1)")
    p.add_argument("--flows", default=",".join(FLOWS), help=f"comma-separated, of {', '.join(FLOWS)}")
    p.add_argument("--history-days", type=int, default=0,
                   help="first create the (empty) run partitions of this many past days (default 0)")
    p.add_argument("--after-jobs", type=int, default=0,
                   help="first schedule this many upstream + after-job pairs, never fired (default 0)")
    p.add_argument("--statements", action="store_true",
                   help="each stage's heaviest statements, those inside the functions included "
                        "(pg_stat_statements, track=all: slows every statement a little)")
    args = parse_args(p, argv)
    if args.history_days < 0:
        p.error("--history-days: must be 0 or more")
    if args.after_jobs < 0:
        p.error("--after-jobs: must be 0 or more")
    n = args.runs or (2000 if args.quick else 20_000)
    reps = args.reps or (1 if args.quick else 3)
    flows = [f.strip() for f in args.flows.split(",") if f.strip()]
    if unknown := set(flows) - set(FLOWS):
        p.error(f"--flows: unknown {', '.join(sorted(unknown))}")
    with Database(args, "sqlcost") as database:
        report = base_report("sqlcost", args, database, argv)
        if args.statements:
            database.set_statement_tracking("all")
        with database.connect() as conn:
            # ensure_run_partitions_at(0, t) makes the days of t and of the day before it: one new
            # partition per call, the day before yesterday first
            for day in range(1, args.history_days + 1):
                conn.execute("SELECT cronbox.ensure_run_partitions_at(0, now() - make_interval(days => %s))", (day,))
            partitions = conn.execute(
                "SELECT count(*) FROM pg_inherits WHERE inhparent = 'cronbox.run'::regclass").fetchone()[0]
        report.update({"n": n, "batch": args.batch, "reps": reps, "history_days": args.history_days,
                       "after_jobs": args.after_jobs,
                       "run_partitions": partitions, "flows": {}})
        for flow in flows:
            repetitions = []
            for i in range(reps):
                rep = run_flow(database, flow, n, args.batch, args.statements, args.after_jobs)
                log(f"{flow} rep {i + 1}/{reps}: total per run {rep['total']}")
                repetitions.append(rep)
            median = {stage: {key: statistics.median(r["stages"][stage][key] for r in repetitions)
                              for key in ("us_per_run", "cpu_us_per_run", "wal_bytes_per_run", "wal_record_bytes_per_run",
                                          "wal_fpi_bytes_per_run", "wal_records_per_run", "btree_entries_per_run")}
                      for stage in FLOWS[flow]}
            report["flows"][flow] = {"repetitions": repetitions, "median": median,
                                     "median_total": {k: statistics.median(r["total"][k] for r in repetitions)
                                                      for k in repetitions[0]["total"]}}
        report["complete"] = all(r["complete"] for f in report["flows"].values() for r in f["repetitions"])
    summary = [f"sqlcost: {n} runs x {reps} reps, batch {args.batch}, {report['run_partitions']} run partitions, "
               f"{'durable' if report['durable'] else 'NOT durable'}; per run, medians"]
    head = f"  {'flow/stage':22} {'us':>7} {'cpu us':>7} {'WAL B':>8} {'rec B':>7} {'FPI B':>7} {'records':>8} {'btree':>6}"
    summary.append(head)
    for flow, data in report["flows"].items():
        for stage, m in list(data["median"].items()) + [("TOTAL", data["median_total"])]:
            summary.append(f"  {flow + '/' + stage:22} {m['us_per_run']:7.1f} {m['cpu_us_per_run']:7.1f} {m['wal_bytes_per_run']:8.1f} "
                           f"{m['wal_record_bytes_per_run']:7.1f} {m['wal_fpi_bytes_per_run']:7.1f} "
                           f"{m['wal_records_per_run']:8.2f} {m['btree_entries_per_run']:6.2f}")
        last = data["repetitions"][-1]["stages"]
        for stage, s in last.items():
            rows = ", ".join(f"{t.removeprefix('cronbox.')} " + "/".join(f"{k}{v:g}" for k, v in c.items())
                             for t, c in s["row_writes_per_run"].items())
            summary.append(f"    rows {flow}/{stage}: {rows}")
            wal = ", ".join(f"{rel} {b:g}" for rel, b in s["wal_bytes_by_relation_and_record_per_run"].items())
            summary.append(f"    WAL B by relation and record {flow}/{stage}: {wal}")
            for st in s.get("statements", [])[:8]:
                if "query" in st:
                    summary.append(f"    stmt {flow}/{stage}: {st['total_ms']:9.1f} ms {st['calls']:7d} calls  {st['query'][:150]}")
    summary.append(f"  every run succeeded once, nothing left queued: {report['complete']}")
    emit(args, report, summary)
    return 0 if report["complete"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
