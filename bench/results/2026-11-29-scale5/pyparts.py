import asyncio, sys, time, statistics
from datetime import timedelta
from pathlib import Path
sys.path.insert(0, '/work/wt/scale')
import psycopg
from psycopg.rows import dict_row, tuple_row
from poller.plan import plan_jobs
from poller import store
dsn = Path('/tmp/scale5/dsn').read_text().strip()
async def main():
    conn = await psycopg.AsyncConnection.connect(dsn, autocommit=True)
    await conn.execute("UPDATE cronbox.job_fire SET frontier = now(), next_fire = now()")
    await conn.execute("TRUNCATE cronbox.job_future")
    res = {}
    for rep in range(int(sys.argv[1])):
        async with conn.transaction(force_rollback=True):
            cur = conn.cursor(row_factory=dict_row)
            await store.claim_saturation(cur, 1000, timedelta(minutes=2))
            t = time.process_time(); jobs = await cur.fetchall(); res.setdefault('fetch_dict', []).append(time.process_time() - t)
            await cur.scroll(0, mode='absolute')
            cur._make_row = cur._make_row  # noqa
            t = time.process_time(); rows = cur._tx.load_rows(0, cur.pgresult.ntuples, lambda v: v); res.setdefault('load_tuples', []).append(time.process_time() - t)
            now = jobs[0]['now']
            t = time.process_time(); planned = plan_jobs(jobs, now, timedelta(minutes=2), timedelta(seconds=30), None); res.setdefault('plan', []).append(time.process_time() - t)
            p = planned.plan
            args = [p.fire_job, p.fire_at, p.missed, p.job, p.frontier, p.next_fire, p.finished, None, None, None, None]
            from psycopg import adapt
            t = time.process_time()
            q = psycopg._queries.PostgresQuery(psycopg.adapt.Transformer(conn))
            params = ", ".join(f"%b::{t}" for t in store._STORE_TYPES[:len(args)])
            q.convert("SELECT " + params + ", %s", [*args, None])
            res.setdefault('dump', []).append(time.process_time() - t)
            t = time.process_time(); await store.store_fires(conn, args, None, None); res.setdefault('store_call_client', []).append(time.process_time() - t)
            res.setdefault('n', []).append((len(jobs), len(p.fire_job)))
    for k, v in res.items():
        if k == 'n': print(k, v[:3]); continue
        print(f"{k:20s} median {statistics.median(v)*1e6/1000:.2f} us per job")
asyncio.run(main())
