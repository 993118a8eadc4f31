#!/bin/bash
# bench.throughput respond mode, main (git archive) and this tree alternated
PY=/work/wt/push/.venv/bin/python
for r in ${ROUNDS:-1 2 3}; do
  for v in main new; do
    dir=/tmp/push/main-tree; [ $v = new ] && dir=/work/wt/push
    echo "round $r $v start $(date -u +%H:%M:%S) load $(cut -d' ' -f1-3 /proc/loadavg)"
    (cd $dir && timeout 900 $PY -m bench.throughput --mode respond --http-batch 100 -n 100000 --reps 1 --no-pull --no-stages > /tmp/push/tp-$v-$r.json 2>/tmp/push/tp-$v-$r.log)
    echo "round $r $v end $(date -u +%H:%M:%S) load $(cut -d' ' -f1-3 /proc/loadavg) $(grep 'CPU ms/run' /tmp/push/tp-$v-$r.log)"
  done
done
