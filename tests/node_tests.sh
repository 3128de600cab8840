#!/usr/bin/env bash
# tests/node_tests.sh D LOG: writes the ONNX node tests into D (tests/ref/gen_onnx_node_tests.py: the PyPI onnx
# wheel ships the generators, not their data) unless D holds them already. D/.complete holds the generator's
# checksum, so a changed generator writes them again. Exit 0 when D holds them; else 1, the generator's last lines
# on stdout (its whole output in LOG). The suites that read node tests call it first, whichever runs first.
set -u
D=$1
LOG=$2
stamp=$(cksum <tests/ref/gen_onnx_node_tests.py)
[ "$(cat "$D/.complete" 2>/dev/null)" = "$stamp" ] && exit 0
rm -rf "$D"
python3 tests/ref/gen_onnx_node_tests.py "$D" >"$LOG" 2>&1 || { echo "generating node tests failed"; tail -n 5 "$LOG"; exit 1; }
echo "$stamp" >"$D/.complete"
