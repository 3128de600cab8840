#!/usr/bin/env bash
# tests/run.sh: runs every test suite of primc and prints the total "N passed, M failed, K skipped" as its last line.
# It fails closed: a suite fails when it exits non-zero, when it prints no "N passed, M failed[, K skipped]" line,
# or when it observed fewer tests than its minimum in tests/suite_min_counts.txt (a suite that silently ran
# fewer tests; PRIMC_MIN_COUNTS names another file). PRIMC_SUITES="unit cli ..." runs only the suites named (tests/suites/fail_closed.sh uses it).
set -u
cd "$(dirname "$0")/.."
B=${B:-build}
LOGS=$B/test-logs
mkdir -p "$LOGS"
export PRIMC_SRC=$PWD
MIN_COUNTS=${PRIMC_MIN_COUNTS:-tests/suite_min_counts.txt}
total_pass=0
total_fail=0
total_skip=0

selected() { [ -z "${PRIMC_SUITES:-}" ] || [[ " $PRIMC_SUITES " == *" $1 "* ]]; }

# run_suite NAME CMD...: runs a suite whose last "N passed, M failed[, K skipped]" line gives its counts
run_suite() {
  local name=$1
  shift
  selected "$name" || return 0
  local log=$LOGS/$name.log start=$SECONDS why=""
  "$@" >"$log" 2>&1
  local rc=$?
  local line p f k
  line=$(grep -E '[0-9]+ passed, [0-9]+ failed' "$log" | tail -n 1)
  p=$(echo " $line" | sed -nE 's/.*[^0-9]([0-9]+) passed, ([0-9]+) failed.*/\1/p')
  f=$(echo " $line" | sed -nE 's/.*[^0-9]([0-9]+) passed, ([0-9]+) failed.*/\2/p')
  k=$(echo " $line" | sed -nE 's/.*[^0-9][0-9]+ passed, [0-9]+ failed, ([0-9]+) skipped.*/\1/p')
  p=${p:-0} f=${f:-0} k=${k:-0}
  if [ -z "$line" ]; then
    why="printed no 'N passed, M failed' line"
    f=$((f + 1))
  fi
  if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then
    why="${why:+$why; }exit status $rc with no failure counted"
    f=1
  fi
  local min
  min=$(awk -v s="$name" '$1 == s {print $2}' "$MIN_COUNTS" 2>/dev/null)
  if [ -z "$min" ]; then
    why="${why:+$why; }no minimum count in $MIN_COUNTS"
    f=$((f + 1))
  elif [ $((p + f + k)) -lt "$min" ]; then
    why="${why:+$why; }observed $((p + f + k)) tests, fewer than its minimum $min in $MIN_COUNTS"
    f=$((f + 1))
  fi
  if [ "$f" -ne 0 ]; then
    echo "--- $name failed (exit $rc${why:+; $why}), last lines of $log:"
    grep -E 'FAIL|check failed|error|Error' "$log" | head -n 40
    tail -n 5 "$log"
  fi
  printf '%-20s %5d passed, %3d failed, %4d skipped  (%ds)\n' "$name:" "$p" "$f" "$k" $((SECONDS - start))
  total_pass=$((total_pass + p))
  total_fail=$((total_fail + f))
  total_skip=$((total_skip + k))
}

run_suite unit "$B/test_primc"
for s in tests/suites/*.sh; do
  [ -f "$s" ] || continue
  run_suite "$(basename "$s" .sh)" bash "$s"
done

echo "total: $total_pass passed, $total_fail failed, $total_skip skipped"
[ "$total_fail" -eq 0 ]
