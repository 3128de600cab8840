#!/usr/bin/env bash
# tests/suites/conformance.sh: the ONNX backend node tests through the importer and the interpreter;
# every test in tests/conformance_expected.txt must pass. Counts are the PASS lines primc printed for the
# expected tests: a test that did not run (primc crashed or stopped early) fails.
set -u
B=${B:-build}
D=${ONNX_NODE_DIR_GEN:-$B/onnx-node-tests}
EXPECTED=tests/conformance_expected.txt
bash tests/node_tests.sh "$D" "$B/onnx-node-gen.log" || { echo "conformance-expected: 0 passed, 1 failed, 0 skipped"; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$B/primc" conformance --dir "$D" --expected "$EXPECTED" >"$tmp/log" 2>&1
rc=$?
grep -vE '^PASS ' "$tmp/log"
grep -vE '^\s*(#|$)' "$EXPECTED" | sort -u >"$tmp/expected"
sed -nE 's/^PASS ([^ ]+)( .*)?$/\1/p' "$tmp/log" | sort -u >"$tmp/passed"
comm -12 "$tmp/expected" "$tmp/passed" >"$tmp/ok"
comm -23 "$tmp/expected" "$tmp/passed" >"$tmp/bad"
# one line per expected test without a PASS: primc's reason, or "did not run"
awk 'FILENAME == ARGV[1] { if ($0 ~ /^(FAIL|UNSUPPORTED) [^ :]+:/) { n = $2; sub(/:$/, "", n); if (!(n in why)) why[n] = $0 }; next }
     { print "FAIL " (($1 in why) ? why[$1] : $1 ": did not run") }' "$tmp/log" "$tmp/bad"
pass=$(wc -l <"$tmp/ok")
fail=$(wc -l <"$tmp/bad")
# primc's own verdict on the expected list must agree: a non-zero exit with every test passing is a failure too
if [ "$rc" -ne 0 ] && [ "$fail" -eq 0 ]; then
  echo "FAIL primc conformance exited $rc although every expected test printed PASS"
  fail=1
fi
echo "conformance-expected: $pass passed, $fail failed, 0 skipped (of $(wc -l <"$tmp/expected") expected; primc exit $rc)"
[ "$fail" -eq 0 ] && [ "$rc" -eq 0 ]
