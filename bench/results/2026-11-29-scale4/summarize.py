import json, sys, re
for path in sys.argv[1:]:
    d = json.load(open(path))
    st = d['steady']; n = st['fires_dispatched']
    print(f"== {path}: load {d['machine']['loadavg_at_start']} sat {d['saturation']['seconds']} s {d['saturation']['futures_written']} fut; window {st['fires_per_s']}/s disp, pg {st['postgres_cpu_ms_per_fire']} ms/fire, p99 {st['fire_to_dispatch_ms']['p99']}, held {d['steady_setup']['held']}, early {st['decided_before_their_time']}")
    rows = sorted(d['steady_statements'], key=lambda r: -r['total_ms'])
    for r in rows[:40]:
        q = re.sub(r'\s+', ' ', r['query'])[:90]
        print(f"  {'T' if r['toplevel'] else ' '} {1000*r['total_ms']/n:7.2f} us/fire {r['buffers']/n:6.2f} buf/fire {r['wal_records']/n:5.2f} wal/fire calls {r['calls']:6d}  {q}")
