"""The poller's Python per claimed job, run from a frozen copy (PYTHONPATH=/tmp/ab9/<rev>): a claim
of 1,000 jobs on the scratch cluster (scratch.py, fill.py), rolled back; process CPU of fetching
the rows (as the revision's saturate.py does: dicts or store.Job) and of plan_jobs over them.
usage: PYTHONPATH=/tmp/ab9/REV python pyparts.py PASSES"""
import asyncio, json, statistics, sys, time
from datetime import timedelta
from pathlib import Path
import psycopg
from psycopg.rows import dict_row
from poller import store
from poller.plan import plan_jobs
row_factory = getattr(store, 'job_row', dict_row)
dsn = Path('/tmp/scale9/dsn').read_text().strip()


async def main(passes: int) -> None:
    conn = await psycopg.AsyncConnection.connect(dsn, autocommit=True)
    res: dict[str, list[float]] = {'fetch': [], 'plan': []}
    for _ in range(passes):
        async with conn.transaction(force_rollback=True):
            cur = conn.cursor(row_factory=row_factory)
            await store.claim_saturation(cur, 1000, timedelta(minutes=2))
            t = time.process_time(); jobs = await cur.fetchall(); res['fetch'].append(time.process_time() - t)
            now = jobs[0]['now'] if isinstance(jobs[0], dict) else jobs[0].now
            t = time.process_time(); plan_jobs(jobs, now, timedelta(minutes=2), timedelta(seconds=30), None)
            res['plan'].append(time.process_time() - t)
    out = {k: round(statistics.median(v) * 1e6 / 1000, 3) for k, v in res.items()}
    out['rows'] = row_factory.__name__
    print(json.dumps(out))
asyncio.run(main(int(sys.argv[1])))
