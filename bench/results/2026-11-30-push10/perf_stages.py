"""Where a run's server CPU goes at C level, stage by stage (a throw-away for 2026-11-30-push10.md).

    python bench/results/2026-11-30-push10/perf_stages.py [--flow push|pull] [-n 20000] [--out DIR]

One durable private cluster, this tree's SQL, N one-off jobs due now (bench.stage_ab's load); the
stages called in batches of 1,000 as bench.stage_ab calls them (push: dispatch, claim_outbox,
ack_outbox; pull: dispatch, claim_runs, complete_runs), one backend, `perf record --call-graph
dwarf` on it with the monotonic clock, each call's window noted, so each sample is counted under
its stage. Each sample is classed by the innermost frame of its stack that names a category
(WAL insertion inside a heap insert counts as WAL; a B-tree search inside the executor as index
reads), and its leaf symbol is counted as self time. The postgres binary is stripped: only its
exported symbols are named (static functions count under the nearest exported one).
"""

from __future__ import annotations

import argparse
import collections
import json
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psycopg

from bench.database import DURABLE_SETTINGS
from bench.stage_ab import BATCH, STAGES, load, stage_calls
from cronbox.migrate import migrate
from cronbox.pgcluster import Cluster

# innermost match wins; (category, regex on the symbol, or "dso:" prefix on the library)
CATEGORIES = [
    ("commit: WAL flush wait", r"^(XLogFlush|issue_xlog_fsync|pg_fsync|XLogWrite|WaitXLogInsertionsToFinish)$"),
    ("WAL insertion", r"^(XLogInsert|XLogInsertRecord|XLogRecordAssemble|XLogRegister\w*|log_heap_\w+)$"),
    ("index maintenance (insert)", r"^(ExecInsertIndexTuples|index_insert|btinsert|_bt_doinsert|_bt_\w*insert\w*|_bt_split)$"),
    ("heap write (insert/update/delete/lock)", r"^(heap_insert|heap_multi_insert|heap_update|heap_delete|heap_lock_tuple|simple_heap_\w+|heapam_tuple_\w+|RelationGetBufferForTuple)$"),
    ("jsonb / json building", r"(?i)^(\w*jsonb\w*|\w*json\w*|pushJsonbValue\w*|datum_to_\w+|composite_to_\w+|row_to_\w+)$"),
    ("tuple routing (partitions)", r"^(ExecFindPartition|ExecInitPartitionInfo|ExecSetupPartitionTupleRouting|get_partition_for_tuple|RelationGetPartitionDesc\w*|ExecCleanupTupleRouting)$"),
    ("triggers / FK checks", r"^(ExecAR\w+Triggers|ExecBR\w+Triggers|AfterTrigger\w+|ExecCallTriggerFunc|RI_\w+|ri_\w+)$"),
    ("planning", r"^(planner|standard_planner|pg_plan_query|BuildCachedPlan|RevalidateCachedQuery|choose_custom_plan|query_planner|subquery_planner)$"),
    ("parse / analyze", r"^(raw_parser|base_yyparse|parse_analyze\w*|pg_analyze_and_rewrite\w*|transformStmt|pg_parse_query)$"),
    ("executor start-up", r"^(standard_ExecutorStart|ExecInitNode|InitPlan|ExecInit\w+|ExecBuildProjectionInfo|ExecReadyExpr|ExecAssignProjectionInfo)$"),
    ("executor shut-down", r"^(standard_ExecutorEnd|ExecEndNode|ExecEnd\w+|FreeExecutorState|ExecCloseIndices|ExecCloseResultRelations)$"),
    ("locks (heavyweight)", r"^(LockAcquire\w*|LockRelease\w*|LockRelationOid|UnlockRelationId|LockRelation\w*|AcquireExecutorLocks|ReleaseCachedPlan|LockTuple\w*)$"),
    ("snapshots / xact visibility", r"^(GetSnapshotData|TransactionIdIsInProgress|HeapTupleSatisfies\w+|XidInMVCCSnapshot|TransactionIdDidCommit|GetTransactionSnapshot|GetLatestSnapshot)$"),
    ("index reads", r"^(_bt_search|_bt_first|_bt_next|_bt_readpage|_bt_checkkeys|_bt_compare|btgettuple|index_getnext\w*|index_fetch_heap|heapam_index_fetch_tuple|_bt_binsrch\w*)$"),
    ("sort", r"^(tuplesort_\w+|qsort\w*|ExecSort)$"),
    ("memory contexts", r"^(AllocSet\w+|palloc\w*|pfree|MemoryContext\w+|repalloc)$"),
    ("SPI (PL/pgSQL -> SQL)", r"^(SPI_\w+|_SPI_\w+)$"),
    ("PL/pgSQL interpreter", r"^dso:plpgsql"),
    ("commit: other", r"^(CommitTransaction|CommitTransactionCommand|RecordTransactionCommit|AtEOXact_\w+|PreCommit_\w+)$"),
    ("kernel (syscalls, network)", r"^dso:\[kernel"),
]
COMPILED = [(name, re.compile(rx)) for name, rx in CATEGORIES]


def classify(frames: list[tuple[str, str]]) -> str:
    for sym, dso in frames:  # leaf first
        for name, rx in COMPILED:
            if rx.pattern.startswith("^dso:"):
                if rx.search("dso:" + dso.rsplit("/", 1)[-1]):
                    return name
            elif rx.search(sym):
                return name
    return "other executor / expression evaluation"


def parse(script: str) -> list[tuple[float, list[tuple[str, str]]]]:
    samples, cur = [], None
    for line in script.splitlines():
        if not line.strip():
            if cur:
                samples.append(cur)
            cur = None
            continue
        if cur is None:
            m = re.search(r"(\d+\.\d+):", line)
            cur = (float(m.group(1)), []) if m else None
            continue
        parts = line.strip().split(None, 1)
        if len(parts) == 2:
            rest = parts[1]
            m = re.match(r"(.*?) \((.*)\)$", rest)
            sym, dso = (m.group(1), m.group(2)) if m else (rest, "")
            sym = re.sub(r"\+0x[0-9a-f]+$", "", sym)
            cur[1].append((sym, dso))
    if cur:
        samples.append(cur)
    return samples


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--flow", choices=("push", "pull"), default="push")
    p.add_argument("-n", type=int, default=20_000)
    p.add_argument("--freq", type=int, default=1999)
    p.add_argument("--out", type=Path, default=Path(__file__).parent)
    args = p.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="cronbox-perf-stages-"))
    cluster = Cluster(folder / "pg", settings=DURABLE_SETTINGS)
    windows: list[tuple[str, float, float]] = []
    try:
        cluster.init()
        dsn = cluster.start()
        migrate(dsn)
        conn = psycopg.connect(dsn, autocommit=True)
        pid = conn.execute("SELECT pg_backend_pid()").fetchone()[0]
        # warm-up round: plans cached, partitions touched
        load(conn, 2 * BATCH)
        calls = stage_calls(conn, args.flow)
        for _ in range(2):
            for c in calls:
                c()
        load(conn, args.n)
        calls = stage_calls(conn, args.flow)
        data = folder / "perf.data"
        rec = subprocess.Popen(["perf", "record", "-q", "-k", "CLOCK_MONOTONIC", "--call-graph", "dwarf,16384",
                                "-F", str(args.freq), "-p", str(pid), "-o", str(data)])
        time.sleep(1.0)  # perf attached
        for _ in range(args.n // BATCH):
            for stage, call in zip(STAGES[args.flow], calls):
                t0 = time.clock_gettime(time.CLOCK_MONOTONIC)
                call()
                windows.append((stage, t0, time.clock_gettime(time.CLOCK_MONOTONIC)))
        rec.send_signal(signal.SIGINT)
        rec.wait()
        conn.close()
        script = subprocess.run(["perf", "script", "-i", str(data), "-F", "time,ip,sym,dso"],
                                capture_output=True, text=True).stdout
    finally:
        cluster.stop()
    samples = parse(script)
    shutil.rmtree(folder, ignore_errors=True)
    by_stage: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    leaf: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    stacks: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    windows.sort(key=lambda w: w[1])
    starts = [w[1] for w in windows]
    import bisect
    for t, frames in samples:
        i = bisect.bisect_right(starts, t) - 1
        if i < 0 or t > windows[i][2] or not frames:
            continue
        stage = windows[i][0]
        by_stage[stage][classify(frames)] += 1
        leaf[stage][frames[0][0] + " (" + frames[0][1].rsplit("/", 1)[-1] + ")"] += 1
        named = [f for f, _ in frames if f != "[unknown]"][:7]
        stacks[stage][" < ".join(named)] += 1
    report = {"flow": args.flow, "n": args.n, "freq": args.freq,
              "stages": {s: {"samples": sum(c.values()), "categories": c.most_common(),
                             "leaf": leaf[s].most_common(25),
                             "stacks": stacks[s].most_common(40)} for s, c in by_stage.items()}}
    out = args.out / f"perf-{args.flow}.json"
    out.write_text(json.dumps(report, indent=1))
    for s, c in by_stage.items():
        total = sum(c.values())
        print(f"== {s}: {total} samples")
        for name, k in c.most_common():
            print(f"   {100 * k / total:5.1f}%  {name}")
        print("   leaf:", ", ".join(f"{n} {100 * k / total:.1f}%" for n, k in leaf[s].most_common(12)))
        for n, k in stacks[s].most_common(15):
            print(f"     {100 * k / total:5.1f}%  {n}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
