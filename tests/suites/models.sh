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
  # issue 20's int8 check: ResNet-18, MobileNetV2 and BERT-base through onnxruntime.quantization (quantize_static in
  # QOperator and QDQ formats, quantize_dynamic) compiled, within one quantization step of ONNX Runtime's int8
  # output on >= 99% of the elements, or (QDQ BERT-base) on as many as ONNX Runtime's own unoptimized run less 5 points
  # (tests/ref/gen_zoo_quant.py, tests/compare_quant.py)
  if python3 tests/ref/gen_zoo_quant.py "$tmp/zq" models/large >"$tmp/zq.log" 2>&1; then
    for d in "$tmp"/zq/*/; do
      name=$(basename "$d")
      if "$B/primc" compile "$d/model.onnx" -o "$tmp/zq-$name.exe" >"$tmp/zq-$name.log" 2>&1 &&
        "$tmp/zq-$name.exe" "$d/in0.npy" -o "$tmp/zq-$name" >>"$tmp/zq-$name.log" 2>&1 &&
        python3 tests/compare_quant.py "$tmp/zq-$name/out0.npy" "$d" >>"$tmp/zq-$name.log" 2>&1; then
        ok "int8 $name vs ONNX Runtime ($(cat "$d/tol.txt")): $(tail -n 1 "$tmp/zq-$name.log")"
      else bad "int8 $name" "$(tail -n 3 "$tmp/zq-$name.log")"; fi
      rm -f "$tmp/zq-$name.exe"
    done
  else bad "tests/ref/gen_zoo_quant.py" "$(tail -n 3 "$tmp/zq.log")"; fi
fi
suite_end models
