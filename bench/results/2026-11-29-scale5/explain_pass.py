import asyncio, sys
from datetime import timedelta
from pathlib import Path
sys.path.insert(0, '/work/wt/scale')
import psycopg
from poller.saturate import saturate_pass
dsn = Path('/tmp/scale5/dsn').read_text().strip()
N = int(sys.argv[1])
with psycopg.connect(dsn, autocommit=True) as c:
    if not c.execute("SELECT count(*) FROM cronbox.job").fetchone()[0]:
        from bench.scale import insert_schedules
        from bench.common import Database
        class D:
            def connect(self): return psycopg.connect(dsn, autocommit=True)
        insert_schedules(D(), N, 10)
    c.execute("UPDATE cronbox.job_fire SET frontier = now(), next_fire = now()")
    c.execute("TRUNCATE cronbox.job_future")
    c.execute("VACUUM ANALYZE cronbox.job_fire, cronbox.job")
async def main():
    conn = await psycopg.AsyncConnection.connect(dsn, autocommit=True)
    notices = []
    conn.add_notice_handler(lambda d: notices.append(d.message_primary))
    for s in ["LOAD 'auto_explain'", "SET auto_explain.log_min_duration = 0", "SET auto_explain.log_nested_statements = on",
              "SET auto_explain.log_analyze = on", "SET auto_explain.log_buffers = on", "SET auto_explain.log_wal = on", "SET client_min_messages = log"]:
        await conn.execute(s)
    p = await saturate_pass(conn, batch=1000, horizon=timedelta(minutes=2), grace=timedelta(seconds=30))
    print(p.planned, p.futures)
    for n in notices:
        if sys.argv[2] in n: print(n)
asyncio.run(main())
