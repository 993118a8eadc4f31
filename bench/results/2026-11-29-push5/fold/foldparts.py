import psycopg, time, statistics, os, sys
c = psycopg.connect("postgresql://postgres@127.0.0.1:54055/s1", autocommit=True)
c.execute("SET work_mem = '64MB'")
pid=c.execute("select pg_backend_pid()").fetchone()[0]
tick=os.sysconf('SC_CLK_TCK')
def cpu():
    f=open(f'/proc/{pid}/stat').read().rsplit(')',1)[1].split()
    return (int(f[11])+int(f[12]))/tick
names=sys.argv[1].split(',')
qs={n:open(f'/tmp/pushw/q_{n}.sql').read() for n in names}
res={n:[] for n in names}
for rep in range(int(sys.argv[2]) if len(sys.argv)>2 else 6):
  for name in names:
    t=cpu(); c.execute(qs[name]).fetchall(); res[name].append(cpu()-t)
    if name=='full': pass
for n in names: print(f"{n:10s} cpu median {statistics.median(res[n])*1e3:7.1f} ms  min {min(res[n])*1e3:7.1f}")
