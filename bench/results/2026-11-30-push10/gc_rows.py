"""The relay's claim rows built with the default collector and with steady_gc's (a throw-away for 2026-11-30-push10.md).

    python bench/results/2026-11-30-push10/gc_rows.py default | tuned 50000,10,10
"""
import gc, sys, time, collections, random
import relay.main  # the relay's heap: its modules, psycopg, aiohttp
from relay.store import _PARTS
from relay.message import bodies
from relay.sinks import Row
mode = sys.argv[1]
if mode == "tuned":
    gc.freeze()
    gc.set_threshold(*map(int, sys.argv[2].split(",")))
base = 1796000000.0
def raw_batch(k):
    return [(k * 1000 + i, "default", f"outbox:{k*1000+i}", None, 0.01, -0.5, 0.001, base, 1, 0,
             f"ab-{k*1000+i}", None, 1, base, base + 3600.0) for i in range(1000)]
inflight = collections.deque(maxlen=8)
t0 = time.process_time()
for k in range(400):
    raw = raw_batch(k)
    body = bodies(raw, _PARTS)
    make = Row._make
    rows = [make((r[0], r[1], r[2], b, r[4], 0.0, 0.0, r[8], r[9])) for r, b in zip(raw, body)]
    inflight.append((raw, rows, [{"outbox_id": r[0], "state": "succeeded"} for r in raw]))
dt = time.process_time() - t0
print(mode, sys.argv[2:] , "us per row", round(dt / 400 / 1000 * 1e6, 3), "gc counts", gc.get_stats()[2]["collections"], len(gc.get_objects()))
