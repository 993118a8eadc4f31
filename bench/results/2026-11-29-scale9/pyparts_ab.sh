#!/bin/bash
# usage: pyparts_ab.sh rounds passes revA revB ...: pyparts.py from each frozen copy, alternated
rounds=$1; passes=$2; shift 2
for i in $(seq 1 $rounds); do
  for r in "$@"; do
    echo "$r $i $(date -u +%T) load $(cut -d' ' -f1 /proc/loadavg) $(cd /tmp/ab9/$r && PYTHONPATH=/tmp/ab9/$r /work/wt/scale/.venv/bin/python /work/wt/scale/bench/results/2026-11-29-scale9/pyparts.py $passes)"
  done
done
