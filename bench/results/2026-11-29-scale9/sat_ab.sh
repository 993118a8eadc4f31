#!/bin/bash
# usage: sat_ab.sh tag rounds N revA revB ...  (bench.saturation --profile from frozen copies
# /tmp/ab9/<rev> (git archive of each commit), alternated round by round)
tag=$1; rounds=$2; n=$3; shift 3
out=/tmp/ab9/out-$tag; mkdir -p $out
for i in $(seq 1 $rounds); do
  for r in "$@"; do
    echo "$r round $i start $(date -u +%T) $(uptime)" >> $out/log
    (cd /tmp/ab9/$r && PYTHONPATH=/tmp/ab9/$r /work/wt/scale/.venv/bin/python -m bench.saturation --schedules $n --reps 1 --profile --json $out/$r-$i.json > $out/$r-$i.out 2>&1)
    echo "$r round $i end $(date -u +%T) rc $? $(uptime)" >> $out/log
    grep -h "median" $out/$r-$i.out >> $out/log
  done
done
