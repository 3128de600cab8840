#!/usr/bin/env bash
# tests/suites/conformance_compiled.sh: every ONNX node test of tests/conformance_expected.txt compiled (passes, LLVM,
# a shared library) at -O0 --unfused and at -O2 must pass like it does on the interpreter; known compiled failures
# are listed with their reasons in tests/conformance_compiled_xfail.txt, reported and not counted as passing.
set -u
B=${B:-build}
D=${ONNX_NODE_DIR_GEN:-$B/onnx-node-tests}
EXPECTED=tests/conformance_expected.txt
XFAIL=tests/conformance_compiled_xfail.txt
# .complete holds the generator's checksum: a changed generator writes the tests again
stamp=$(cksum < tests/ref/gen_onnx_node_tests.py)
if [ "$(cat "$D/.complete" 2>/dev/null)" != "$stamp" ]; then
  rm -rf "$D"
  python3 tests/ref/gen_onnx_node_tests.py "$D" >"$B/onnx-node-gen.log" 2>&1 || { echo "generating node tests failed"; tail -n 5 "$B/onnx-node-gen.log"; exit 1; }
  echo "$stamp" >"$D/.complete"
fi
logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT

# the two modes run side by side: one core each
modes=("O0:-O0 --unfused" "O2:-O2")
for m in "${modes[@]}"; do
  tag=${m%%:*}
  # shellcheck disable=SC2086
  (start=$SECONDS
   "$B/primc" conformance --dir "$D" --compiled ${m#*:} --expected "$EXPECTED" --list-failures >"$logs/$tag.log" 2>&1
   echo $((SECONDS - start)) >"$logs/$tag.time") &
done
wait

n_expected=$(grep -cvE '^\s*(#|$)' "$EXPECTED")
total_pass=0
total_fail=0
for m in "${modes[@]}"; do
  tag=${m%%:*}
  pass=0 fail=0 xfail=0
  # expected tests that did not pass compiled: "REGRESSION name: FAIL"
  grep -E '^REGRESSION ' "$logs/$tag.log" | sed -E 's/^REGRESSION ([^:]+):.*/\1/' | sort -u >"$logs/$tag.bad"
  while read -r t; do
    reason=$(grep -E "^$t +($tag|all) " "$XFAIL" 2>/dev/null | head -n 1 | sed -E 's/^[^ ]+ +[^ ]+ +//')
    why=$(grep -E "^(FAIL|UNSUPPORTED) $t:" "$logs/$tag.log" | head -n 1)
    if [ -n "$reason" ]; then
      xfail=$((xfail + 1))
      echo "XFAIL -$tag $t: $reason"
    else
      fail=$((fail + 1))
      echo "FAIL -$tag ${why:-$t: did not pass}"
    fi
  done <"$logs/$tag.bad"
  # listed as known failures but passing now: the list should shrink
  grep -E "^[a-z0-9_]+ +($tag|all) " "$XFAIL" 2>/dev/null | awk '{print $1}' | while read -r t; do
    grep -qx "$t" "$logs/$tag.bad" || echo "XPASS -$tag $t: passes now, remove it from $XFAIL"
  done
  pass=$((n_expected - fail - xfail))
  echo "compiled -${m#*:}: $pass of $n_expected expected tests pass, $fail fail, $xfail known failures ($(cat "$logs/$tag.time") s; $(grep -E '^conformance: ' "$logs/$tag.log" | head -n 1 | sed 's/^conformance: //'))"
  total_pass=$((total_pass + pass))
  total_fail=$((total_fail + fail))
done
echo "conformance-compiled: $total_pass passed, $total_fail failed"
[ "$total_fail" -eq 0 ]
