#!/usr/bin/env bash
# tests/suites/fail_closed.sh: the test suites fail closed. tests/run.sh runs every other suite against a fake build
# dir whose primc and test_primc (a) die of SIGSEGV at once and (b) exit 0 printing nothing; every suite must then
# fail by itself (non-zero exit and a failure in its own count line) and run.sh must fail. It also checks that a
# suite observing fewer tests than its minimum in tests/suite_min_counts.txt fails. The node test dir given to the
# suites is an empty one with a valid stamp, so that nothing is generated and the fake runs take seconds.
set -u
. tests/suite_lib.sh

suites=unit
for s in tests/suites/*.sh; do
  n=$(basename "$s" .sh)
  [ "$n" = fail_closed ] || suites="$suites $n"
done

mkdir -p "$tmp/segv" "$tmp/silent" "$tmp/nodes"
cksum <tests/ref/gen_onnx_node_tests.py >"$tmp/nodes/.complete"
printf '#include <signal.h>\nint main(void) { raise(SIGSEGV); return 0; }\n' >"$tmp/segv.c"
if ! cc -o "$tmp/segv/primc" "$tmp/segv.c"; then
  echo "fail-closed: 0 passed, 1 failed, 0 skipped (cannot build the fake primc)"
  exit 1
fi
cp "$tmp/segv/primc" "$tmp/segv/test_primc"
printf '#!/bin/sh\nexit 0\n' >"$tmp/silent/primc"
chmod +x "$tmp/silent/primc"
cp "$tmp/silent/primc" "$tmp/silent/test_primc"

for fake in segv silent; do
  B=$tmp/$fake ONNX_NODE_DIR_GEN=$tmp/nodes PRIMC_SUITES="$suites" bash tests/run.sh >"$tmp/$fake.log" 2>&1
  rc=$?
  [ "$rc" -ne 0 ] && ok "$fake primc: run.sh exits $rc" || bad "$fake primc: run.sh" "exited 0"
  grep -qE '^total: [0-9]+ passed, [1-9][0-9]* failed' "$tmp/$fake.log" && ok "$fake primc: total counts failures" ||
    bad "$fake primc: total" "$(tail -n 1 "$tmp/$fake.log")"
  for s in $suites; do
    # run.sh's own line for the suite, then the suite's verdict by itself: its exit status and its count line
    line=$(grep -E "^$s: +[0-9]+ passed, +[0-9]+ failed, +[0-9]+ skipped  \(" "$tmp/$fake.log" | tail -n 1)
    own=$(grep -E '[0-9]+ passed, [0-9]+ failed' "$tmp/$fake/test-logs/$s.log" 2>/dev/null | tail -n 1)
    if ! echo "$line" | grep -qE ' [1-9][0-9]* failed'; then
      bad "$fake primc: $s" "run.sh did not count a failure: '$line'"
    elif [ "$s" = unit ]; then
      # the unit suite is the fake binary itself: run.sh must see its exit status or its missing count line
      if grep -qE "^--- unit failed \(exit ([1-9]|0; printed no)" "$tmp/$fake.log"; then ok "$fake primc: unit fails ($line)"
      else bad "$fake primc: unit" "run.sh gave no reason: $(grep -E '^--- unit' "$tmp/$fake.log")"; fi
    elif ! grep -qE "^--- $s failed \(exit [1-9]" "$tmp/$fake.log"; then
      bad "$fake primc: $s" "the suite itself exited 0"
    elif ! echo "$own" | grep -qE ' [1-9][0-9]* failed'; then
      bad "$fake primc: $s" "the suite's own count line shows no failure: '$own'"
    else
      ok "$fake primc: $s fails ($line)"
    fi
  done
done

# a suite that ran fewer tests than its minimum fails although it passed: determinism (seconds) against a minimum of
# one more than it has
if [ -x "${B:-build}/primc" ]; then
  awk '$1 == "determinism" {print $1, $2 + 1; next} {print}' tests/suite_min_counts.txt >"$tmp/min"
  PRIMC_MIN_COUNTS=$tmp/min PRIMC_SUITES=determinism bash tests/run.sh >"$tmp/min.log" 2>&1
  rc=$?
  if [ "$rc" -ne 0 ] && grep -q 'fewer than its minimum' "$tmp/min.log"; then ok "a suite under its minimum count fails"
  else bad "minimum count" "run.sh exit $rc: $(tail -n 3 "$tmp/min.log")"; fi
else
  bad "minimum count" "no ${B:-build}/primc to run the determinism suite with"
fi
suite_end fail-closed
