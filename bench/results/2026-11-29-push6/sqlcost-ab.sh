#!/bin/bash
# alternated: this tree (push), main
for r in 1 2; do
  for side in push main; do
    if [ $side = push ]; then d=/work/wt/push; else d=/tmp/mainsrc; fi
    echo "== round $r side $side start $(date -u +%T) load $(cut -d' ' -f1-3 /proc/loadavg)"
    (cd $d && /work/wt/push/.venv/bin/python -m bench.sqlcost --flows push,pull --reps 1 -n 20000 --json /tmp/sqlab/$side-$r.json 2>&1 | tail -40)
    echo "== end $(date -u +%T) load $(cut -d' ' -f1-3 /proc/loadavg)"
  done
done
