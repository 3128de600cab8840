#!/usr/bin/env bash
# tests/suites/models.sh: every bundled model matches its ONNX Runtime reference (1e-4 relative), interpreted
# by primc and compiled to a standalone executable fused (-O2) and unfused (-O0 --unfused).
# With PRIMC_LARGE=1 (make test-large) also the large and extended zoos of `make models` (models/large/,
# models/extended/), compiled fused only:
# interpreting BERT-base takes minutes. Their outputs are checked normwise (1e-4 of the largest |output|):
# see tests/compare_npy.py for why.
set -u
B=${B:-build}
. tests/suite_lib.sh

# check LABEL NAME DIR CMD...: runs CMD (which writes $tmp/LABEL-NAME/out0.npy) and compares with DIR/expected.npy
check() {
  local label=$1 name=$2 d=$3 how=${NORMWISE:-}
  shift 3
  local out=$tmp/$label-$name log=$tmp/$label-$name.log
  if "$@" >"$log" 2>&1 && python3 tests/compare_npy.py "$out/out0.npy" "$d/expected.npy" --rtol 1e-4 --atol 1e-5 $how >>"$log" 2>&1; then
    echo "PASS $label $name: $(tail -n 1 "$log")"
    pass=$((pass + 1))
  else
    echo "FAIL $label $name: $(tail -n 3 "$log")"
    fail=$((fail + 1))
  fi
}

for d in models/*/; do
  [ -f "$d/model.onnx" ] || continue
  name=$(basename "$d")
  check interp "$name" "$d" "$B/primc" run "$d/model.onnx" "$d/input.npy" -o "$tmp/interp-$name"
  for variant in "fused:-O2" "unfused:-O0 --unfused"; do
    label=${variant%%:*}
    # shellcheck disable=SC2086
    check "$label" "$name" "$d" bash -c "'$B/primc' compile '$d/model.onnx' -o '$tmp/$label-$name.exe' ${variant#*:} &&
      '$tmp/$label-$name.exe' '$d/input.npy' -o '$tmp/$label-$name'"
  done
done
if [ "${PRIMC_LARGE:-0}" = 1 ]; then
  ls models/large/*/model.onnx >/dev/null 2>&1 || echo "no models/large: run make models first"
  for d in models/large/*/ models/extended/*/; do
    [ -f "$d/model.onnx" ] || continue
    name=$(basename "$d")
    start=$SECONDS
    NORMWISE=--normwise check fused "$name" "$d" bash -c "'$B/primc' compile '$d/model.onnx' -o '$tmp/fused-$name.exe' -O2 &&
      '$tmp/fused-$name.exe' '$d/input.npy' -o '$tmp/fused-$name'"
    echo "  ($name: $((SECONDS - start)) s compile and run)"
    rm -f "$tmp/fused-$name.exe"
  done
fi
suite_end models
