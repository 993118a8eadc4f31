"""Time variants of the claim's message expression over 20,000 outbox rows."""
import sys, time, tempfile, statistics
from pathlib import Path
sys.path.insert(0, str(Path(__file__).resolve().parents[3]))
import psycopg
from cronbox.pgcluster import Cluster
from cronbox.migrate import migrate
from bench.stage_ab import load

folder = Path(tempfile.mkdtemp(prefix='push-exp-'))
cl = Cluster(folder / 'pg'); cl.init(); dsn = cl.start()
try:
    migrate(dsn)
    c = psycopg.connect(dsn, autocommit=True)
    load(c, 20000)
    for _ in range(20):
        c.execute("SELECT cronbox.dispatch(1000)")
    print(c.execute("select count(*) from cronbox.outbox").fetchone())
    base = "FROM cronbox.outbox l"
    V = {
     'cols': "sum(length(l.job_name)+length(l.queue)+l.outbox_id+l.attempt) + sum(extract(epoch from l.fire_at))",
     'msg_json': "sum(length(cronbox.run_message_json(l.outbox_id, l.job_name, l.queue, l.payload, l.fire_at, l.attempt, l.available_at + l.timeout)::text))",
     'to_json_text2': "sum(length(to_json(l.job_name)::text)+length(to_json(l.queue)::text))",
     'to_json_ts2': "sum(length(to_json(l.fire_at)::text)+length(to_json(l.available_at + l.timeout)::text))",
     'payload_text': "sum(length(l.payload::text))",
     'json_check': "sum(length(('{\"job\": \"' || l.job_name || '\", \"a\": 1}')::json::text))",
     'concat_only': "sum(length('{\"job\": \"' || l.job_name || '\", \"a\": 1}'))",
     'binary_cols': None,
    }
    res = {k: [] for k in V if V[k]}
    for r in range(5):
        for k, e in V.items():
            if not e: continue
            t = time.perf_counter(); c.execute(f"SELECT {e} {base}").fetchone(); res[k].append((time.perf_counter()-t)/20000*1e6)
    for k, v in res.items():
        print(f"{k:15s} {min(v):6.2f} us/row (median {statistics.median(v):.2f})")
finally:
    cl.stop()
