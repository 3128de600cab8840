#!/usr/bin/env bash
# tests/suites/grad.sh: `--grad` (passes/autodiff.c) on every bundled model against PyTorch autograd
# (models/NAME/grad.npz, tests/ref/gen_grad_refs.py): the gradient of every input and weight, interpreted
# and compiled, and the interface `primc inputs --grad` reports.
set -u
B=${B:-build}
. tests/suite_lib.sh

# check LABEL NAME CMD...: runs CMD (which writes $tmp/LABEL-NAME/out*.npy) and compares with the references
check() {
  local label=$1 name=$2
  shift 2
  local log=$tmp/$label-$name.log
  if "$@" >"$log" 2>&1 && python3 tests/compare_grads.py "$tmp/$label-$name" "models/$name/grad.npz" 1 >>"$log" 2>&1; then
    echo "PASS $label $name: $(tail -n 1 "$log")"
    pass=$((pass + 1))
  else
    echo "FAIL $label $name: $(tail -n 3 "$log")"
    fail=$((fail + 1))
  fi
}

for d in models/*/; do
  name=$(basename "$d")
  [ -f "$d/grad.npz" ] || continue
  python3 -c "import numpy as np; np.save('$tmp/ct-$name.npy', np.load('$d/grad.npz')['ct0'])"
  check interp "$name" "$B/primc" run --grad "$d/model.onnx" "$d/input.npy" "$tmp/ct-$name.npy" -o "$tmp/interp-$name"
  check compiled "$name" bash -c "'$B/primc' compile --grad '$d/model.onnx' -o '$tmp/$name.exe' &&
    '$tmp/$name.exe' '$d/input.npy' '$tmp/ct-$name.npy' -o '$tmp/compiled-$name'"
done

# the interface: cotangents after the inputs, gradients after the outputs, named for what they belong to
got=$("$B/primc" inputs --grad models/mlp/model.onnx 2>&1 | awk '{print $1, $2}' | tr '\n' ' ')
want="input input input grad_output output output output grad_input output grad_net.0.weight output grad_net.0.bias \
output grad_net.2.weight output grad_net.2.bias output grad_net.4.weight output grad_net.4.bias "
if [ "$got" = "$want" ]; then ok "inputs --grad lists the cotangent and the gradients in order"
else bad "inputs --grad lists the cotangent and the gradients in order" "got: $got"; fi

# the transformed graph prints in the text format and parses back to the same text
if "$B/primc" dump --grad models/mlp/model.onnx >"$tmp/g1.txt" 2>&1 && "$B/primc" dump "$tmp/g1.txt" >"$tmp/g2.txt" 2>&1 &&
  cmp -s "$tmp/g1.txt" "$tmp/g2.txt" && grep -q 'return (%output, %grad_input, %grad_net.0.weight' "$tmp/g1.txt"; then
  ok "dump --grad parses back"
else bad "dump --grad parses back" "$(head -c 300 "$tmp/g2.txt")"; fi

# a gradient through a prim with no rule is an error naming the model node, and nothing is written
printf 'graph(%%x : f64[3]):\n  %%b : f32[3,2] = bitcast(%%x, dtype=f32)\n  %%y : f32[] = reduce_sum(%%b, axes=[0,1])\n  return (%%y)\n' >"$tmp/norule.txt"
expect_exit 1 "compile --grad through bitcast fails" "$B/primc" compile --grad "$tmp/norule.txt" -o "$tmp/norule"
if grep -q "bitcast has no gradient rule" "$tmp/err" && [ ! -e "$tmp/norule" ]; then ok "the error names the prim, no output"
else bad "the error names the prim, no output" "$(cat "$tmp/err")"; fi
suite_end grad
