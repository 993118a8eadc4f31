"""store_fires_at old vs new on the scratch cluster: 1000 jobs a call, a fraction of them with one
fire each; backend CPU from /proc per call (each call rolled back), versions alternated."""
import os, statistics, sys, time
from pathlib import Path
import psycopg
dsn = Path('/tmp/scale5/dsn').read_text().strip()
files = {'old': Path('/tmp/ab5/main/sql/functions/internal/store_fires_at.sql').read_text(),
         'new': Path('/tmp/ab5/new/sql/functions/internal/store_fires_at.sql').read_text()}
ROUNDS, CALLS, FRAC = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
def cpu(pid):
    f = open(f'/proc/{pid}/stat').read().rsplit(')', 1)[1].split()
    return (int(f[11]) + int(f[12])) / os.sysconf('SC_CLK_TCK')
with psycopg.connect(dsn) as c:
    c.autocommit = True
    pid = c.execute("SELECT pg_backend_pid()").fetchone()[0]
    now = c.execute("SELECT now()").fetchone()[0]
    ids = [r[0] for r in c.execute("SELECT job_id FROM cronbox.job ORDER BY random() LIMIT 20000")]
    res = {'old': [], 'new': []}
    from datetime import timedelta
    for r in range(ROUNDS):
        for v in (['old', 'new'] if r % 2 == 0 else ['new', 'old']):
            c.execute(files[v])
            c0 = cpu(pid); t0 = time.perf_counter()
            for k in range(CALLS):
                jobs = ids[(k % 20) * 1000:(k % 20 + 1) * 1000]
                fired = jobs[:int(1000 * FRAC)]
                fire = [now + timedelta(seconds=60)] * len(fired)
                with c.transaction(force_rollback=True):
                    c.execute("SELECT futures FROM cronbox.store_fires_at(%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, p_now => %s)",
                              (fired, fire, [False] * len(fired), jobs, [now + timedelta(seconds=60)] * 1000,
                               [now + timedelta(seconds=120)] * 1000, [False] * 1000, [None] * 1000, None, None, None, now))
            res[v].append((cpu(pid) - c0) / CALLS * 1000)
            print(v, r, round(res[v][-1], 3), 'ms backend CPU per call', round((time.perf_counter() - t0) / CALLS * 1000, 2), 'ms wall', flush=True)
    c.execute(files['new'])
    print({v: round(statistics.median(x), 3) for v, x in res.items()})
