import sys, timeit, time
from pathlib import Path
sys.path.insert(0, str(Path(__file__).resolve().parents[3]))
import orjson
from relay.sinks import Row, Report, _accept_batch
from relay.store import ack_outcomes, id_array
from relay import metrics as rm
N = 1000
rows = [Row(10**15 + i, 'default', f'{10**15+i}:1', '{"job": "tp-1", "queue": "default", "run_id": 1}'*5, 0.5, 0.0, 0.0, 1, 0) for i in range(N)]
answer = orjson.dumps([{"state": "succeeded"}] * 100)
ids = [r.outbox_id for r in rows]
def t(name, fn, n=20):
    v = min(timeit.repeat(fn, number=n, repeat=9, timer=time.process_time)) / n / N * 1e6
    print(f"{name:28s} {v:.3f} µs/row")
t("Row build", lambda: [Row(r[0], r[1], r[2], r[3], r[4], 0.0, 0.0, r[7], r[8]) for r in rows])
t("Report(rows)", lambda: Report(rows))
t("body join+encode", lambda: [("[" + ",".join(r.body for r in rows[i:i+100]) + "]").encode() for i in range(0, N, 100)])
def acc():
    rep = Report(rows)
    for i in range(0, N, 100):
        _accept_batch(ids[i:i+100], answer, rep)
    return rep
t("Report + _accept_batch", acc)
rep = acc()
t("ack_outcomes", lambda: ack_outcomes(rep))
t("id_array", lambda: id_array(rep.ok))
t("report.of", lambda: rep.of(rows))
t("observe_batch", lambda: rm.observe_batch(rows, set(rep.ok), [], lambda q: "http", 0.01))
raw = [(10**15 + i, 'default', f'{10**15+i}:1', None, 0.5, 0.0, 0.0, 1.7e9, 1, 0) for i in range(N)]
body = [r.body for r in rows]
t("Row(...) zip", lambda: [Row(r[0], r[1], r[2], b, r[4], 0.0, 0.0, r[8], r[9]) for r, b in zip(raw, body)])
mk = Row._make
t("Row._make zip", lambda: [mk((r[0], r[1], r[2], b, r[4], 0.0, 0.0, r[8], r[9])) for r, b in zip(raw, body)])
new = tuple.__new__
t("tuple.__new__ zip", lambda: [new(Row, (r[0], r[1], r[2], b, r[4], 0.0, 0.0, r[8], r[9])) for r, b in zip(raw, body)])
