#!/usr/bin/env bash
# tests/suites/conformance_compiled.sh: every ONNX node test of tests/conformance_expected.txt compiled (passes, LLVM,
# a shared library) at -O0 --unfused and at -O2 must pass like it does on the interpreter; known compiled failures
# are listed with their reasons in tests/conformance_compiled_xfail.txt, reported and counted as skipped.
# Passes are the PASS lines primc printed: an expected test with no line (primc crashed, stopped early or printed
# nothing) fails, and so does a non-zero exit of primc.
set -u
B=${B:-build}
D=${ONNX_NODE_DIR_GEN:-$B/onnx-node-tests}
EXPECTED=tests/conformance_expected.txt
XFAIL=tests/conformance_compiled_xfail.txt
bash tests/node_tests.sh "$D" "$B/onnx-node-gen.log" || { echo "conformance-compiled: 0 passed, 1 failed, 0 skipped"; exit 1; }
logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT

# the two modes run side by side: one core each
modes=("O0:-O0 --unfused" "O2:-O2")
for m in "${modes[@]}"; do
  tag=${m%%:*}
  # shellcheck disable=SC2086
  (start=$SECONDS
   "$B/primc" conformance --dir "$D" --compiled ${m#*:} --expected "$EXPECTED" >"$logs/$tag.log" 2>&1
   echo $? >"$logs/$tag.rc"
   echo $((SECONDS - start)) >"$logs/$tag.time") &
done
wait

grep -vE '^\s*(#|$)' "$EXPECTED" | sort -u >"$logs/expected"
n_expected=$(wc -l <"$logs/expected")
total_pass=0
total_fail=0
total_xfail=0
for m in "${modes[@]}"; do
  tag=${m%%:*}
  rc=$(cat "$logs/$tag.rc")
  pass=0 fail=0 xfail=0
  sed -nE 's/^PASS ([^ ]+)( .*)?$/\1/p' "$logs/$tag.log" | sort -u >"$logs/$tag.passed"
  comm -12 "$logs/expected" "$logs/$tag.passed" >"$logs/$tag.ok"
  comm -23 "$logs/expected" "$logs/$tag.passed" >"$logs/$tag.bad"
  pass=$(wc -l <"$logs/$tag.ok")
  # each expected test that printed no PASS: a known failure when the xfail list names it for this mode and primc
  # reported it (FAIL or UNSUPPORTED), a failure otherwise (one awk pass: the list may hold every expected test)
  awk -v tag="$tag" -v counts="$logs/$tag.counts" '
    FILENAME == ARGV[1] {
      if ($0 !~ /^[ \t]*(#|$)/ && ($2 == tag || $2 == "all") && !($1 in x)) { r = $0; sub(/^[^ ]+ +[^ ]+ +/, "", r); x[$1] = r }
      next
    }
    FILENAME == ARGV[2] {
      if ($0 ~ /^(FAIL|UNSUPPORTED) [^ :]+:/) { n = $2; sub(/:$/, "", n); if (!(n in why)) why[n] = $0 }
      next
    }
    {
      if (($1 in x) && ($1 in why)) { print "XFAIL -" tag " " $1 ": " x[$1]; nx++ }
      else { print "FAIL -" tag " " (($1 in why) ? why[$1] : $1 ": did not run"); nf++ }
    }
    END { print nf + 0, nx + 0 > counts }' "$XFAIL" "$logs/$tag.log" "$logs/$tag.bad"
  read -r fail xfail <"$logs/$tag.counts"
  # listed as known failures but passing now: the list should shrink
  grep -E "^[a-z0-9_]+ +($tag|all) " "$XFAIL" 2>/dev/null | awk '{print $1}' | while read -r t; do
    grep -qx "$t" "$logs/$tag.ok" && echo "XPASS -$tag $t: passes now, remove it from $XFAIL"
  done
  # primc's exit status: non-zero exactly when an expected test did not pass
  if [ "$rc" -ne 0 ] && [ $((fail + xfail)) -eq 0 ]; then
    echo "FAIL -$tag: primc conformance exited $rc although every expected test printed PASS"
    fail=$((fail + 1))
  elif [ "$rc" -eq 0 ] && [ $((fail + xfail)) -ne 0 ]; then
    echo "FAIL -$tag: primc conformance exited 0 although $((fail + xfail)) expected tests did not pass"
    fail=$((fail + 1))
  fi
  echo "compiled -${m#*:}: $pass of $n_expected expected tests pass, $fail fail, $xfail known failures, primc exit $rc ($(cat "$logs/$tag.time") s; $(grep -E '^conformance: ' "$logs/$tag.log" | head -n 1 | sed 's/^conformance: //'))"
  total_pass=$((total_pass + pass))
  total_fail=$((total_fail + fail))
  total_xfail=$((total_xfail + xfail))
done
echo "conformance-compiled: $total_pass passed, $total_fail failed, $total_xfail skipped (skipped: known failures of $XFAIL)"
[ "$total_fail" -eq 0 ]
