"""Client CPU of the relay's claim statement, 1,000 rows: message from the database (p_parts false)
against parts written by relay/message.py (p_parts true); each claim rolled back, alternated."""
import sys, time, tempfile, statistics, resource
from pathlib import Path
sys.path.insert(0, str(Path(__file__).resolve().parents[3]))
import psycopg
from cronbox.pgcluster import Cluster
from cronbox.migrate import migrate
from bench.stage_ab import load
from relay.store import _CLAIM, _PARTS
from relay.message import bodies as b0
bodies = lambda raw: b0(raw, _PARTS)

folder = Path(tempfile.mkdtemp(prefix='push-exp-'))
cl = Cluster(folder / 'pg'); cl.init(); dsn = cl.start()
try:
    migrate(dsn)
    c = psycopg.connect(dsn, autocommit=True)
    load(c, 1000)
    c.execute("SELECT cronbox.dispatch(1000)")
    c.autocommit = False
    pid = c.execute("SELECT pg_backend_pid()").fetchone()[0]; c.rollback()
    def server_cpu():
        with open(f"/proc/{pid}/stat") as f:
            parts = f.read().rsplit(")", 1)[1].split()
        return (int(parts[11]) + int(parts[12])) / 100
    res = {False: [], True: []}
    srv = {False: 0.0, True: 0.0}
    for r in range(60):
        for parts in (False, True) if r % 2 else (True, False):
            s0 = server_cpu()
            t = time.process_time()
            raw = c.execute(_CLAIM, ("r1", 1000, "30 seconds", None, None, "0", None, parts), binary=True).fetchall()
            b = bodies(raw)
            res[parts].append((time.process_time() - t) / len(raw) * 1e6)
            c.rollback()
            srv[parts] += server_cpu() - s0
            assert len(raw) == 1000
    for parts in (False, True):
        print(f"p_parts={parts}: client µs/row median {statistics.median(res[parts]):.2f} min {min(res[parts]):.2f};"
              f" server CPU µs/row {srv[parts] / 60 / 1000 * 1e6:.2f} (10 ms ticks)")
finally:
    cl.stop()
