#!/bin/sh
# benchmarks/results_file.py: a benchmark's one results file has a header with
# the command, machine, date and commit, and a second run overwrites it.
#   tests/benchmarks/results_file_test.sh SOURCE_DIR
set -eu
src="$1"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
file="$tmp/results/cpu-example.txt"
fail() { echo "FAIL: $*"; echo "--- $file:"; cat "$file" 2>/dev/null || true; exit 1; }

python3 "$src/benchmarks/results_file.py" "$file" -- sh -c 'echo first run; exit 3' > "$tmp/stdout" 2> "$tmp/stderr" \
  && fail "the command's status 3 was not passed on" || [ $? -eq 3 ] || fail "exit status not 3"
grep -qx 'first run' "$tmp/stdout" || fail "the output is not passed through to stdout"
grep -q "results written to $file" "$tmp/stderr" || fail "no 'results written to' line"
sed -n 1p "$file" | grep -qx "# sh -c echo first run; exit 3" || fail "line 1 is not the command"
sed -n 2p "$file" | grep -Eq '^# machine: .+; date: [0-9]{4}-[0-9]{2}-[0-9]{2} [0-9]{2}:[0-9]{2} UTC; llmc at commit [0-9a-f]{7,}' \
  || fail "line 2 does not state the machine, date and commit"
sed -n 3p "$file" | grep -qx 'first run' || fail "the output does not follow the header"

python3 "$src/benchmarks/results_file.py" "$file" -- sh -c 'echo second run' > /dev/null 2>&1 || fail "second run failed"
grep -q 'first run' "$file" && fail "the second run did not overwrite the file"
grep -qx 'second run' "$file" || fail "the second run's output is missing"

# record(): what a benchmark prints goes to the file; a run that exits part-way leaves it alone.
cd "$src/benchmarks"
python3 -c "import results_file
with results_file.record('$file', ['bench']): print('recorded')" > /dev/null 2>&1 || fail "record() failed"
sed -n 3p "$file" | grep -qx recorded || fail "record() did not write what was printed"
python3 -c "import results_file, sys
with results_file.record('$file', ['bench']): print('partial'); sys.exit(1)" > /dev/null 2>&1 && fail "sys.exit(1) was swallowed"
grep -q partial "$file" && fail "a run that exited part-way overwrote the results file"
echo "PASS: results_file.py"
