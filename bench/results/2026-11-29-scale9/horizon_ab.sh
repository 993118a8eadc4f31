#!/bin/bash
# bench.scale every-minute 200k on main (frozen copy /tmp/ab9/main), the default horizon (2m)
# against CRONBOX_HORIZON=4m, alternated, ROUNDS pairs (the order swapped every other pair)
rounds=${1:-3}
out=/tmp/ab9/out-horizon; mkdir -p $out
for i in $(seq 1 $rounds); do
  if [ $((i % 2)) = 1 ]; then order="2m 4m"; else order="4m 2m"; fi
  for h in $order; do
    echo "$h round $i start $(date -u +%T) $(uptime)" >> $out/log
    (cd /tmp/ab9/main && PYTHONPATH=/tmp/ab9/main /work/wt/scale/.venv/bin/python -m bench.scale --mix every-minute --schedules 200000 --steady 58 --pull-workers 2 --future-sizes 10000 --dispatch-reps 1 --timeout 600 --horizon $h --json $out/$h-$i.json > $out/$h-$i.out 2>&1)
    echo "$h round $i end $(date -u +%T) rc $? $(uptime)" >> $out/log
  done
done
