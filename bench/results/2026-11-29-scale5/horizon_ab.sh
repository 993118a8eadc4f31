#!/bin/bash
# bench.scale every-minute 200k, the default horizon (2m) against CRONBOX_HORIZON=4m, on main, alternated
out=/tmp/ab5/out-horizon; mkdir -p $out
for i in 1; do
  for h in 2m 4m; do
    echo "$h round $i start $(date -u +%T) $(uptime)" >> $out/log
    (cd /tmp/ab5/main && PYTHONPATH=/tmp/ab5/main /work/wt/scale/.venv/bin/python -m bench.scale --mix every-minute --schedules 200000 --steady 58 --pull-workers 2 --future-sizes 10000 --dispatch-reps 1 --timeout 600 --env CRONBOX_HORIZON=$h --json $out/$h-$i.json > $out/$h-$i.out 2>&1)
    echo "$h round $i end $(date -u +%T) rc $? $(uptime)" >> $out/log
  done
done
