"""The relay's claim as the relay runs it (relay.store._CLAIM of the tree on sys.path), with
batches in flight: claim 1,000, ack the oldest once 4 are out (succeeded), until N are done.
Prints per run: the claim's and the ack's backend CPU and wall time (medians over calls)."""
import argparse, json, statistics, sys, time
from bench.common import Database, cpu_seconds, parse_args
from bench.pipeline import load
from cronbox import db
from relay.store import _CLAIM
p = argparse.ArgumentParser(); p.add_argument("-n", type=int, default=40000); p.add_argument("--inflight", type=int, default=4)
args = parse_args(p, sys.argv[1:])
B = 1000
with Database(args, "claimbench") as database:
    load(database, args.n, None)
    with database.connect() as conn:
        conn.execute("VACUUM ANALYZE cronbox.job_future")
        while conn.execute("SELECT dispatched FROM cronbox.dispatch(1000)").fetchone()[0]:
            pass
        conn.execute("VACUUM ANALYZE cronbox.outbox"); conn.execute("CHECKPOINT")
        pid = conn.execute("SELECT pg_backend_pid()").fetchone()[0]
        out, cw, aw = [], [], []
        ccpu = acpu = 0.0; claimed = 0
        while True:
            c0 = cpu_seconds(pid); t = time.perf_counter()
            rows = conn.execute(_CLAIM, ("cb", B, "30 seconds", None, None, "0", None)).fetchall()
            cw.append((time.perf_counter() - t) / max(len(rows), 1)); ccpu += cpu_seconds(pid) - c0
            claimed += len(rows)
            if rows:
                out.append([r[0] for r in rows])
            if len(out) >= args.inflight or (not rows and out):
                ids = out.pop(0)
                c0 = cpu_seconds(pid); t = time.perf_counter()
                conn.execute("SELECT cronbox.ack_outbox('cb', %s, %s)", (ids, db.Jsonb([{"outbox_id": i, "state": "succeeded"} for i in ids])))
                aw.append((time.perf_counter() - t) / len(ids)); acpu += cpu_seconds(pid) - c0
            if not rows and not out:
                break
        left = conn.execute("SELECT count(*) FROM cronbox.outbox").fetchone()[0]
    res = {"n": args.n, "claimed": claimed, "left": left, "claim_cpu_us": ccpu / claimed * 1e6, "ack_cpu_us": acpu / claimed * 1e6,
           "claim_wall_us_median": statistics.median(cw[:-1]) * 1e6, "ack_wall_us_median": statistics.median(aw) * 1e6}
    print(json.dumps(res))
