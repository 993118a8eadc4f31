import psycopg, time, statistics, os, sys
c = psycopg.connect("postgresql://postgres@127.0.0.1:54055/s1")
pid=c.execute("select pg_backend_pid()").fetchone()[0]
tick=os.sysconf('SC_CLK_TCK')
def cpu():
    f=open(f'/proc/{pid}/stat').read().rsplit(')',1)[1].split()
    return (int(f[11])+int(f[12]))/tick
names=sys.argv[1].split(',')
qs={n:open(f'/tmp/pushw/q_{n}.sql').read() for n in names}
res={n:[] for n in names}
for rep in range(int(sys.argv[2])):
  for name in (names if rep%2==0 else names[::-1]):
    c.execute("SET LOCAL work_mem = '64MB'"); c.execute("SET LOCAL enable_seqscan = off"); c.execute("SET LOCAL jit = off")
    if 'nohash' in sys.argv: c.execute("SET LOCAL enable_hashjoin = off"); c.execute("SET LOCAL enable_mergejoin = off")
    t=cpu(); r=c.execute(qs[name]).fetchall(); res[name].append(cpu()-t)
    c.rollback()
  if rep==0: print({n: None for n in names}, r)
for n in names: print(f"{n:10s} cpu median {statistics.median(res[n])*1e3:7.1f} ms  min {min(res[n])*1e3:7.1f}  ({statistics.median(res[n])/20000*1e6:.2f} us/job)")
