"""due_ahead old vs new on one private cluster, alternated: N ready futures due at S distinct
seconds within the next minute, K calls each version per round."""
import shutil, statistics, sys, tempfile, time
from pathlib import Path
import psycopg
sys.path.insert(0, '/work/wt/scale')
from cronbox.migrate import migrate
from cronbox.pgcluster import Cluster
from bench.database import DURABLE_SETTINGS
N = int(sys.argv[1]); S = int(sys.argv[2]); ROUNDS = int(sys.argv[3])
files = {v: Path(f'/tmp/scale4/dueab/{v}.sql').read_text() for v in ('old', 'new')}
folder = Path(tempfile.mkdtemp(prefix='dueab-'))
c = Cluster(folder / 'pg', settings=DURABLE_SETTINGS); c.init(); dsn = c.start()
try:
    migrate(dsn)
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("SELECT cronbox.schedule('d0', cron => '0 0 1 1 *', overlap => 'skip')")
        jid = conn.execute("SELECT job_id FROM cronbox.job").fetchone()[0]
        conn.execute("INSERT INTO cronbox.job_future (job_id, fire_at, due_at, attempt, origin, queue, bucket) "
                     "SELECT %s, t, t, i, 'schedule', 'default', 0 FROM (SELECT i, date_trunc('second', now()) + interval '30 seconds' + (i %% %s) * interval '1 second' AS t "
                     "FROM generate_series(1, %s) i) x", (jid, S, N))
        conn.execute("VACUUM ANALYZE cronbox.job_future")
        res = {'old': [], 'new': []}
        for r in range(ROUNDS):
            for v in (['old', 'new'] if r % 2 == 0 else ['new', 'old']):
                conn.execute(files[v])
                out = None
                for k in range(5):
                    t = time.perf_counter()
                    got = conn.execute("SELECT * FROM cronbox.due_ahead('1 minute', 10000000)").fetchall()
                    res[v].append(1000 * (time.perf_counter() - t))
                    out = out or got
                print(v, r, [round(x, 1) for x in res[v][-5:]], sum(n for _, n in got), len(got), flush=True)
        print({v: round(statistics.median(x), 1) for v, x in res.items()})
finally:
    c.stop(); shutil.rmtree(folder, ignore_errors=True)
