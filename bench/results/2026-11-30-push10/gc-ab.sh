#!/bin/bash
for r in 1 2; do
 for t in main push; do
  d=/work/main; [ $t = push ] && d=/work/wt/push
  echo "== $t round $r $(date -u +%T) $(uptime | sed 's/.*load/load/')"
  (cd $d && .venv/bin/python -m bench.throughput -n 40000 --reps 1 --no-pull --no-stages --mode respond --http-batch 100 2>&1 | grep -E "CPU ms/run|cronbox  median")
 done
done
