"""Futures insert: ON CONFLICT DO NOTHING (speculative) vs a read of existing fires then a plain insert,
alternated on the scratch cluster; per variant: ms per 1000 jobs x 3 fires, WAL bytes/records per future."""
import statistics, sys, time
from pathlib import Path
import psycopg
dsn = Path('/tmp/scale5/dsn').read_text().strip()
ROUNDS = int(sys.argv[1])
SPEC = """INSERT INTO cronbox.job_future (job_id, fire_at, due_at, priority, bucket, queue)
SELECT f.job_id, f.fire_at, f.fire_at, 0, 0, 'default' FROM unnest(%s::bigint[], %s::timestamptz[]) AS f(job_id, fire_at)
ON CONFLICT ON CONSTRAINT job_future_fire_unique DO NOTHING RETURNING job_id"""
READ = """SELECT array_agg(f.i) FROM unnest(%s::bigint[], %s::timestamptz[]) WITH ORDINALITY AS f(job_id, fire_at, i)
WHERE EXISTS (SELECT 1 FROM cronbox.job_future x WHERE x.job_id = f.job_id AND x.fire_at = f.fire_at AND x.attempt = 1 AND x.origin = 'schedule')"""
PLAIN = """INSERT INTO cronbox.job_future (job_id, fire_at, due_at, priority, bucket, queue)
SELECT f.job_id, f.fire_at, f.fire_at, 0, 0, 'default' FROM unnest(%s::bigint[], %s::timestamptz[]) WITH ORDINALITY AS f(job_id, fire_at, i)
WHERE NOT (f.i = ANY (coalesce(%s::bigint[], '{}'))) RETURNING job_id"""
with psycopg.connect(dsn, autocommit=True) as c:
    ids = [r[0] for r in c.execute("SELECT job_id FROM cronbox.job ORDER BY random() LIMIT 30000")]
    base = c.execute("SELECT date_trunc('minute', now()) + interval '1 day'").fetchone()[0]
    from datetime import timedelta
    res = {'spec': [], 'plain': []}; wal = {'spec': [], 'plain': []}
    k = 0
    for r in range(ROUNDS):
        for v in (['spec', 'plain'] if r % 2 == 0 else ['plain', 'spec']):
            chunk = ids[(k % 30) * 1000:(k % 30 + 1) * 1000]; k += 1
            jobs = [j for j in chunk for _ in range(3)]
            at = [base + timedelta(minutes=k * 3 + i) for _ in chunk for i in range(3)]
            w0 = c.execute("SELECT pg_current_wal_insert_lsn()").fetchone()[0]
            cpu0 = c.execute("SELECT 1").fetchone()
            t = time.perf_counter()
            with c.transaction():
                if v == 'spec':
                    n = len(c.execute(SPEC, (jobs, at)).fetchall())
                else:
                    found = c.execute(READ, (jobs, at)).fetchone()[0]
                    n = len(c.execute(PLAIN, (jobs, at, found)).fetchall())
            res[v].append((time.perf_counter() - t) * 1000)
            w1 = c.execute("SELECT pg_wal_lsn_diff(pg_current_wal_insert_lsn(), %s)", (w0,)).fetchone()[0]
            wal[v].append(float(w1) / n)
            assert n == 3000, n
    c.execute("DELETE FROM cronbox.job_future WHERE fire_at >= %s", (base,))
    for v in res:
        print(v, 'median ms per 3000 futures', round(statistics.median(res[v]), 2), 'WAL bytes/future', round(statistics.median(wal[v]), 1))
