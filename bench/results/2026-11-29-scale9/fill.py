"""Fill the scratch cluster (scratch.py) with N jobs of bench.scale's mix, saturation state reset to empty."""
import sys
from pathlib import Path
sys.path.insert(0, '/work/wt/scale')
import psycopg
from bench.scale import insert_schedules
dsn = Path('/tmp/scale9/dsn').read_text().strip()
class D:
    def connect(self): return psycopg.connect(dsn, autocommit=True)
with psycopg.connect(dsn, autocommit=True) as c:
    if not c.execute("SELECT count(*) FROM cronbox.job").fetchone()[0]:
        insert_schedules(D(), int(sys.argv[1]), 10)
    c.execute("UPDATE cronbox.job_fire SET frontier = now(), next_fire = now()")
    c.execute("TRUNCATE cronbox.job_future")
    c.execute("VACUUM ANALYZE cronbox.job_fire, cronbox.job")
    print(c.execute("SELECT count(*) FROM cronbox.job").fetchone()[0], 'jobs')
