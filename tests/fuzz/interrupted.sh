#!/bin/bash
# llmc-fuzz cut short by SIGTERM (as `timeout` cuts a batch) still reports:
# the diagrams still running are listed as unfinished, none is counted as
# passed, no child is left behind, and it exits 1.
# usage: interrupted.sh LLMC_FUZZ OUT_DIR
set -u
fuzz=$1 out=$2
log=$(timeout --preserve-status -s TERM 4 "$fuzz" --seed 1 --count 1000 --checks nvrtc --jobs 2 --no-shrink --out "$out" 2>&1)
rc=$?
echo "$log" | tail -3
[ $rc -eq 1 ] || { echo "FAIL: exit status $rc, expected 1"; exit 1; }
echo "$log" | grep -Eq "^interrupted: [0-9]+ diagrams unfinished \(seeds [0-9 ]+\)$" || { echo "FAIL: no list of unfinished seeds"; exit 1; }
echo "$log" | grep -Eq "^[0-9]+ passed, [0-9]+ failed, [0-9]+ unfinished$" || { echo "FAIL: no summary"; exit 1; }
sleep 0.5
if pgrep -f -- "--seed 1 --count 1000 --checks nvrtc" > /dev/null; then echo "FAIL: children left running"; exit 1; fi
echo "ok"
