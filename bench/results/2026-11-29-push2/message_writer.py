import sys, timeit
from pathlib import Path
sys.path.insert(0, str(Path(__file__).resolve().parents[3]))
import orjson
from relay.message import iso_time
from relay.message import bodies as b0
from relay.store import _PARTS
bodies = lambda rows: b0(rows, _PARTS)
rows = [(10**15 + i, 'default', f'{10**15+i}:1', None, 0.5, 0.0, 0.0, 1.7e9, 1, 0, f'tp-{i}', '{}', 1, 1764403200.123456, 1764403500.5) for i in range(1000)]
print("bodies", min(timeit.repeat(lambda: bodies(rows), number=20, repeat=15, timer=__import__("time").process_time)) / 20 / 1000 * 1e6, "µs/row")
def bodies2(raw):
    times = {}
    queues = {}
    dumps = orjson.dumps
    out = []
    for r in raw:
        if r[14] is None:
            out.append(r[3]); continue
        f = times.get(r[13])
        if f is None:
            f = times[r[13]] = iso_time(r[13])
        d = times.get(r[14])
        if d is None:
            d = times[r[14]] = iso_time(r[14])
        q = queues.get(r[1])
        if q is None:
            q = queues[r[1]] = dumps(r[1]).decode()
        job = r[10]
        out.append(f'{{"job": {"null" if job is None else dumps(job).decode()}, "queue": {q}, "run_id": {r[0]}, '
                   f'"attempt": {"null" if r[12] is None else r[12]}, "fire_at": {f}, '
                   f'"payload": {"null" if r[11] is None else r[11]}, "deadline": {d}, "idempotency_key": "{r[2]}"}}')
    return out
assert bodies2(rows) == bodies(rows), (bodies2(rows)[0], bodies(rows)[0])
print("bodies2", min(timeit.repeat(lambda: bodies2(rows), number=20, repeat=15, timer=__import__("time").process_time)) / 20 / 1000 * 1e6, "µs/row")
print("dumps", min(timeit.repeat(lambda: [orjson.dumps(r[10]).decode() for r in rows], number=20, repeat=15, timer=__import__("time").process_time)) / 20 / 1000 * 1e6)
