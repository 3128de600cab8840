#!/usr/bin/env bash
# tools/demo.sh: compiles the bundled ResNet-style model to a standalone executable and runs it on its bundled input.
set -euo pipefail
cd "$(dirname "$0")/.."
B=${B:-build}
M=models/resnet_tiny
out=$B/demo
mkdir -p "$out"
echo "== primc compile $M/model.onnx -o $out/resnet_tiny"
"$B/primc" compile "$M/model.onnx" -o "$out/resnet_tiny"
echo "== $out/resnet_tiny $M/input.npy -o $out/result"
"$out/resnet_tiny" "$M/input.npy" -o "$out/result"
echo "== compare with ONNX Runtime's output"
python3 tests/compare_npy.py "$out/result/out0.npy" "$M/expected.npy"
"$out/resnet_tiny" "$M/input.npy" --bench 20
