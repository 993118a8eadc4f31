"""Planning cost of the relay's statements: prepared vs not (empty outbox: execution is tiny)."""
import argparse, time, os, statistics
from datetime import timedelta
import psycopg
from bench.database import Database
from relay.store import _CLAIM

def backend_cpu(pid):
    with open(f"/proc/{pid}/stat") as f:
        parts = f.read().rsplit(")", 1)[1].split()
    return (int(parts[11]) + int(parts[12])) / os.sysconf("SC_CLK_TCK")

args = argparse.Namespace(dsn=None, fast=True, pg=[], keep=False)
N = 1500
with Database(args, "plancost") as d:
    res = {}
    for rnd in range(3):
        for label, thr in (("unprepared", None), ("prepared", 0)):
            with psycopg.connect(d.dsn, autocommit=True, prepare_threshold=thr) as conn:
                conn.execute("SET TimeZone = 'UTC'")
                pid = conn.info.backend_pid
                params = ("r1", 1000, timedelta(seconds=30), None, None, timedelta(0), None, True)
                for _ in range(20):
                    conn.execute(_CLAIM, params, binary=True).fetchall()
                    conn.execute("SELECT cronbox.ack_outbox(%s, %s::bigint[], %s, %s)", ("r1", "{}", None, None)).fetchone()
                c0 = backend_cpu(pid); t0 = time.perf_counter()
                for _ in range(N):
                    conn.execute(_CLAIM, params, binary=True).fetchall()
                t1 = time.perf_counter(); c1 = backend_cpu(pid)
                for _ in range(N):
                    conn.execute("SELECT cronbox.ack_outbox(%s, %s::bigint[], %s, %s)", ("r1", "{}", None, None)).fetchone()
                t2 = time.perf_counter(); c2 = backend_cpu(pid)
                res.setdefault(label, []).append(((t1-t0)/N*1e6, (c1-c0)/N*1e6, (t2-t1)/N*1e6, (c2-c1)/N*1e6))
                print(label, rnd, "claim wall %.1f cpu %.1f us/call; ack wall %.1f cpu %.1f us/call" % res[label][-1], flush=True)
    with psycopg.connect(d.dsn, autocommit=True) as conn:
        conn.execute("SET TimeZone = 'UTC'")
        for q in (_CLAIM.replace("%s", "NULL").replace("(NULL, NULL, NULL, NULL, NULL, p_ahead => NULL, p_bucket => NULL, p_parts => NULL)", "('r1', 1000, '30 s', NULL, NULL, p_ahead => '0', p_bucket => NULL, p_parts => true)"),
                  "SELECT cronbox.ack_outbox('r1', '{}'::bigint[], NULL, NULL)"):
            for _ in range(3):
                plan = conn.execute("EXPLAIN (ANALYZE, SUMMARY) " + q).fetchall()
            print([r[0] for r in plan if "Planning" in r[0] or "Execution" in r[0]])
