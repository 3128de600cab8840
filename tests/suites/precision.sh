#!/usr/bin/env bash
# tests/suites/precision.sh: f16 and bf16 models (issue 20) compiled and interpreted against float64 numpy
# references (tests/ref/gen_lowp.py), and their contractions run by the f32 GEMM and conv rows, not elementwise;
# f64 contractions and a 3-D f32 conv, run by primc's own GEMMs; and compiled code links no BLAS (issue 24).
set -u
B=${B:-build}
P=$(realpath -m "$B/primc")
. tests/suite_lib.sh

python3 tests/ref/gen_lowp.py "$tmp/lp" >"$tmp/gen.log" 2>&1 || bad "gen_lowp.py" "$(tail -n 3 "$tmp/gen.log")"
# one f16 rounding of an f32 sum: within 2 units in the last place of f16 (bf16: of bf16)
for d in "$tmp"/lp/*/; do
  n=$(basename "$d")
  tol="--rtol 2e-3 --atol 1e-3"
  [[ $n == *bf16* ]] && tol="--rtol 1.6e-2 --atol 1e-2"
  [[ $n == *f32* ]] && tol="--rtol 1e-4 --atol 1e-5"
  [[ $n == *f64* ]] && tol="--rtol 1e-10 --atol 1e-12"
  ins=$(ls "$d"/in*.npy)
  # shellcheck disable=SC2086
  if timeout 300 "$P" compile "$d/model.onnx" -o "$tmp/$n.exe" >"$tmp/err" 2>&1 && "$tmp/$n.exe" $ins -o "$tmp/$n.c" >/dev/null 2>>"$tmp/err" &&
    python3 tests/compare_npy.py "$tmp/$n.c/out0.npy" "$d/expected.npy" $tol >>"$tmp/err" 2>&1; then ok "$n compiled matches numpy"
  else bad "$n compiled" "$(tail -n 3 "$tmp/err")"; fi
  # shellcheck disable=SC2086
  if timeout 300 "$P" run "$d/model.onnx" $ins -o "$tmp/$n.i" >/dev/null 2>"$tmp/err" &&
    python3 tests/compare_npy.py "$tmp/$n.i/out0.npy" "$d/expected.npy" $tol >>"$tmp/err" 2>&1; then ok "$n interpreted matches numpy"
  else bad "$n interpreted" "$(tail -n 3 "$tmp/err")"; fi
done

# the narrow weights are widened once at compile time and packed for the f32 GEMM; the conv runs a conv row
"$P" dump "$tmp/lp/matmul_f16/model.onnx" --kernels >"$tmp/k" 2>&1
grep -q 'const f32\[70,45\]' "$tmp/k" && grep -q 'call primc_k_dot_packed' "$tmp/k" && ! grep -q 'const f16' "$tmp/k" &&
  ok "f16 MatMul: weights widened at compile time, packed f32 GEMM" || bad "f16 MatMul kernels" "$(head -c 600 "$tmp/k")"
"$P" dump "$tmp/lp/conv_f16/model.onnx" --kernels >"$tmp/k" 2>&1
grep -q 'call primc_k_conv' "$tmp/k" && grep -q 'const f32\[20,12,3,3\]' "$tmp/k" &&
  ok "f16 Conv: an f32 conv row on widened weights" || bad "f16 Conv kernels" "$(head -c 600 "$tmp/k")"

# what a compiled model needs at run time: libc, libm, libpthread, nothing heavy (no OpenBLAS, no gfortran)
if [ -x "$tmp/matmul_f64_blocks.exe" ]; then
  libs=$(ldd "$tmp/matmul_f64_blocks.exe" 2>&1)
  echo "$libs" | grep -q 'libm\.so' && ! echo "$libs" | grep -q -E 'openblas|gfortran|blas' &&
    ok "a compiled f64 model links no BLAS" || bad "compiled model's libraries" "$libs"
else
  bad "matmul_f64_blocks executable" "missing"
fi

suite_end precision
