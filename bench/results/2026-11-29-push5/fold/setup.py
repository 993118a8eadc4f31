# Prepare database s1 of a scratch cluster (port 54055 here): N one-off runs dispatched; then claim and ack them all (see push5.md §3).
import sys, psycopg
from cronbox.migrate import migrate
from bench.stage_ab import load
base = "postgresql://postgres@127.0.0.1:54055/"
with psycopg.connect(base + "postgres", autocommit=True) as c:
    c.execute("DROP DATABASE IF EXISTS s1"); c.execute("CREATE DATABASE s1")
migrate(base + "s1")
with psycopg.connect(base + "s1", autocommit=True) as c:
    load(c, int(sys.argv[1]))
    while c.execute("SELECT dispatched FROM cronbox.dispatch(1000)").fetchone()[0]:
        pass
    c.execute("VACUUM ANALYZE cronbox.outbox")
    print(c.execute("select count(*) from cronbox.outbox").fetchone())
