"""store_fires_at on main vs with p_job in order (the change), on the scratch cluster (scratch.py,
fill.py): 1,000 jobs a call, FRAC of them with one fire each, each call rolled back; backend CPU
from /proc per call; the function bodies alternated in the same session. Variants: main with the
jobs in claim order (random ids, as the poller sent them), main with them sorted, the change
(sorted, as the poller now sends them).
usage: python store_ab.py ROUNDS CALLS FRAC"""
import os, statistics, sys, time
from datetime import timedelta
from pathlib import Path
import psycopg
dsn = Path('/tmp/scale9/dsn').read_text().strip()
body = {'main': Path('/tmp/ab9/main/sql/functions/internal/store_fires_at.sql').read_text(),
        'sort': Path('/tmp/ab9/sort/sql/functions/internal/store_fires_at.sql').read_text()}
VARIANTS = [('main-claim-order', 'main', False), ('main-sorted', 'main', True), ('sort', 'sort', True)]
ROUNDS, CALLS, FRAC = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])


def cpu(pid: int) -> float:
    f = open(f'/proc/{pid}/stat').read().rsplit(')', 1)[1].split()
    return (int(f[11]) + int(f[12])) / os.sysconf('SC_CLK_TCK')


with psycopg.connect(dsn, autocommit=True) as c:
    pid = c.execute("SELECT pg_backend_pid()").fetchone()[0]
    now = c.execute("SELECT now()").fetchone()[0]
    ids = [r[0] for r in c.execute("SELECT job_id FROM cronbox.job ORDER BY random() LIMIT 20000")]
    res: dict[str, list[float]] = {v[0]: [] for v in VARIANTS}
    for r in range(ROUNDS):
        for name, fn, ordered in (VARIANTS if r % 2 == 0 else VARIANTS[::-1]):
            c.execute(body[fn])
            c0 = cpu(pid); t0 = time.perf_counter()
            for k in range(CALLS):
                jobs = ids[(k % 20) * 1000:(k % 20 + 1) * 1000]
                if ordered:
                    jobs = sorted(jobs)
                fired = jobs[:int(1000 * FRAC)]
                fire = [now + timedelta(seconds=60)] * len(fired)
                with c.transaction(force_rollback=True):
                    c.execute("SELECT futures FROM cronbox.store_fires_at(%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, p_now => %s)",
                              (fired, fire, [False] * len(fired), jobs, [now + timedelta(seconds=60)] * 1000,
                               [now + timedelta(seconds=120)] * 1000, [False] * 1000, None, None, None, None, now))
            res[name].append((cpu(pid) - c0) / CALLS * 1000)
            print(name, r, round(res[name][-1], 3), 'ms backend CPU a call', round((time.perf_counter() - t0) / CALLS * 1000, 2),
                  'ms wall', time.strftime('%H:%M:%S', time.gmtime()), 'load', open('/proc/loadavg').read().split()[0], flush=True)
    c.execute(body['sort'])
    print({v: round(statistics.median(x), 3) for v, x in res.items()})
