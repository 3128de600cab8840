#!/usr/bin/env bash
# tests/suites/conformance.sh: the ONNX backend node tests through the importer and the interpreter;
# every test in tests/conformance_expected.txt must pass.
set -u
B=${B:-build}
D=${ONNX_NODE_DIR_GEN:-$B/onnx-node-tests}
# the PyPI onnx wheel ships the node test generators, not their data: write the tests once per build dir
# .complete holds the generator's checksum: a changed generator writes the tests again
stamp=$(cksum < tests/ref/gen_onnx_node_tests.py)
if [ "$(cat "$D/.complete" 2>/dev/null)" != "$stamp" ]; then
  rm -rf "$D"
  python3 tests/ref/gen_onnx_node_tests.py "$D" >"$B/onnx-node-gen.log" 2>&1 || { echo "generating node tests failed"; tail -n 5 "$B/onnx-node-gen.log"; exit 1; }
  echo "$stamp" >"$D/.complete"
fi
"$B/primc" conformance --dir "$D" --expected tests/conformance_expected.txt --list-failures
rc=$?
# the summary line "conformance: N passed, M failed, K unsupported of T" counts for the total only through the expected list:
# report the expected tests as this suite's count
n=$(grep -cv '^#' tests/conformance_expected.txt)
if [ $rc -eq 0 ]; then echo "conformance-expected: $n passed, 0 failed"; else echo "conformance-expected: 0 passed, 1 failed"; fi
exit $rc
