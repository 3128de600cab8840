#!/usr/bin/env bash
# tests/run.sh: runs every test suite of primc and prints the total "N passed, N failed" as its last line.
set -u
cd "$(dirname "$0")/.."
B=${B:-build}
LOGS=$B/test-logs
mkdir -p "$LOGS"
export PRIMC_SRC=$PWD
total_pass=0
total_fail=0

# run_suite NAME CMD...: runs a suite whose last "N passed, M failed" line gives its counts
run_suite() {
  local name=$1
  shift
  local log=$LOGS/$name.log start=$SECONDS
  "$@" >"$log" 2>&1
  local rc=$?
  local line
  line=$(grep -E '[0-9]+ passed, [0-9]+ failed' "$log" | tail -n 1)
  local p f
  p=$(echo " $line" | sed -nE 's/.*[^0-9]([0-9]+) passed, ([0-9]+) failed.*/\1/p')
  f=$(echo " $line" | sed -nE 's/.*[^0-9]([0-9]+) passed, ([0-9]+) failed.*/\2/p')
  p=${p:-0}
  f=${f:-0}
  if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then f=1; fi
  if [ "$f" -ne 0 ]; then
    echo "--- $name failed (exit $rc), last lines of $log:"
    grep -E 'FAIL|check failed|error|Error' "$log" | head -n 40
    tail -n 5 "$log"
  fi
  printf '%-14s %5d passed, %3d failed  (%ds)\n' "$name:" "$p" "$f" $((SECONDS - start))
  total_pass=$((total_pass + p))
  total_fail=$((total_fail + f))
}

run_suite unit "$B/test_primc"
for s in tests/suites/*.sh; do
  [ -f "$s" ] || continue
  run_suite "$(basename "$s" .sh)" bash "$s"
done

echo "total: $total_pass passed, $total_fail failed"
[ "$total_fail" -eq 0 ]
