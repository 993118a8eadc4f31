#!/bin/bash
# usage: run_ab.sh tag rounds revA revB ...
tag=$1; rounds=$2; shift 2
out=/tmp/ab/out-$tag; mkdir -p $out
for i in $(seq 1 $rounds); do
  for r in "$@"; do
    echo "$r round $i start $(date -u +%T) $(uptime)" >> $out/log
    (cd /tmp/ab/$r && PYTHONPATH=/tmp/ab/$r /work/wt/scale/.venv/bin/python -m bench.scale --mix every-minute --schedules ${N:-200000} --steady ${STEADY:-1} --future-sizes 10000 --dispatch-reps 1 --timeout 600 $EXTRA --json $out/$r-$i.json > $out/$r-$i.out 2>&1)
    echo "$r round $i end $(date -u +%T) rc $? $(uptime)" >> $out/log
    grep -h "saturation from empty" $out/$r-$i.out >> $out/log
  done
done
