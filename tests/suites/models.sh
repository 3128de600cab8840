#!/usr/bin/env bash
# tests/suites/models.sh: every bundled model, interpreted by primc, matches its ONNX Runtime reference.
set -u
B=${B:-build}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
pass=0
fail=0
for d in models/*/; do
  [ -f "$d/model.onnx" ] || continue
  name=$(basename "$d")
  if "$B/primc" run "$d/model.onnx" "$d/input.npy" -o "$tmp/$name" >"$tmp/$name.log" 2>&1 &&
    python3 tests/compare_npy.py "$tmp/$name/out0.npy" "$d/expected.npy" --rtol 1e-4 --atol 1e-5 >>"$tmp/$name.log" 2>&1; then
    echo "PASS interp $name: $(tail -n 1 "$tmp/$name.log")"
    pass=$((pass + 1))
  else
    echo "FAIL interp $name: $(tail -n 1 "$tmp/$name.log")"
    fail=$((fail + 1))
  fi
done
echo "models: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
