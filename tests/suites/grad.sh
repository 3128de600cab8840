#!/usr/bin/env bash
# tests/suites/grad.sh: `--grad` (passes/autodiff.c) on every bundled model against PyTorch autograd
# (models/NAME/grad.npz, tests/ref/gen_grad_refs.py): the gradient of every input and weight, interpreted
# and compiled, and the interface `primc inputs --grad` reports; `--train` (passes/train.c) executables
# against torch.optim (tests/data/train/, tests/ref/gen_train_refs.py): losses per step and trained weights.
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
  # forward mode, where the model has a float input: its tangent through the compiled --jvp
  python3 -c "import numpy as np; d = np.load('$d/grad.npz'); 't0' in d.files and np.save('$tmp/t-$name.npy', d['t0'])"
  [ -f "$tmp/t-$name.npy" ] || continue
  log=$tmp/jvp-$name.log
  if "$B/primc" compile --jvp "$d/model.onnx" -o "$tmp/$name-jvp.exe" >"$log" 2>&1 &&
    "$tmp/$name-jvp.exe" "$d/input.npy" "$tmp/t-$name.npy" -o "$tmp/jvp-$name" >>"$log" 2>&1 &&
    python3 tests/compare_grads.py "$tmp/jvp-$name" "$d/grad.npz" 1 jt >>"$log" 2>&1; then
    ok "jvp $name: $(tail -n 1 "$log")"
  else bad "jvp $name" "$(tail -n 3 "$log")"; fi
done

for c in tests/data/train/*.npz; do
  name=$(basename "$c" .npz)
  mkdir -p "$tmp/train-$name"
  if python3 tests/compare_train.py "$B/primc" "$c" "$tmp/train-$name" >"$tmp/train-$name.log" 2>&1; then
    ok "train $name: $(tail -n 1 "$tmp/train-$name.log")"
  else bad "train $name" "$(tail -n 4 "$tmp/train-$name.log")"; fi
done
"$B/primc" compile --train --loss cross_entropy models/mlp/model.onnx -o "$tmp/mlp-train" >"$tmp/c.log" 2>&1 || bad "compile --train" "$(cat "$tmp/c.log")"
python3 -c "import numpy as np; np.save('$tmp/x5.npy', np.zeros((3, 5), np.float32)); np.save('$tmp/y3.npy', np.zeros(3, np.int64))"
expect_exit 1 "a dataset of the wrong row shape is refused" "$tmp/mlp-train" "$tmp/x5.npy" "$tmp/y3.npy"
grep -q "rows of its shape without the batch dim" "$tmp/err" && ok "the error says what a dataset holds" || bad "the error says what a dataset holds" "$(cat "$tmp/err")"
expect_exit 0 "three training steps run" "$tmp/mlp-train" --random-inputs --steps 3
grep -q -E "^3 steps, [0-9.]+ ms per step, median [0-9.]+, first [0-9.]+ " "$tmp/out" &&
  ok "the summary gives the mean, the median and the first step's time" || bad "step times in the summary" "$(cat "$tmp/out")"
expect_exit 2 "--steps 0 is a usage error" "$tmp/mlp-train" --random-inputs --steps 0
expect_exit 2 "--profile on a step compiled without it" "$tmp/mlp-train" --random-inputs --profile
expect_exit 2 "--steps on a model that does not train" "$tmp/mlp.exe" --random-inputs --steps 1
# one initializer read by two model nodes (torch.onnx's dedup of identical tensors) is trained as one: said
grep -q "primc: note: --train" "$tmp/c.log" && bad "an untied model gets no tied-weights note" "$(cat "$tmp/c.log")" ||
  ok "an untied model gets no tied-weights note"
python3 -c "
import numpy as np, onnx
from onnx import helper as h, TensorProto as T
w = h.make_tensor('W', T.FLOAT, [4, 4], np.eye(4, dtype=np.float32).ravel())
b = h.make_tensor('b', T.FLOAT, [4], np.zeros(4, np.float32))
g = h.make_graph([h.make_node('MatMul', ['x', 'W'], ['h'], name='fc1'), h.make_node('Relu', ['h'], ['r'], name='act'),
                  h.make_node('MatMul', ['r', 'W'], ['m'], name='fc2'), h.make_node('Add', ['m', 'b'], ['y'], name='bias')],
                 'tied', [h.make_tensor_value_info('x', T.FLOAT, [2, 4])], [h.make_tensor_value_info('y', T.FLOAT, [2, 4])], [w, b])
onnx.save(h.make_model(g, opset_imports=[h.make_opsetid('', 17)]), '$tmp/tied.onnx')"
expect_exit 0 "a model with a tied weight trains" "$B/primc" compile --train "$tmp/tied.onnx" -o "$tmp/tied-train" --report
grep -q "primc: note: --train: 1 weight read by several model nodes, each trained as one parameter: 'W' (2 model nodes)$" "$tmp/err" &&
  grep -q "^  tied weights: 1 weight read by several model nodes" "$tmp/out" &&
  ok "the tied weight is named on stderr and in --report" || bad "the tied weight is named" "$(cat "$tmp/err" "$tmp/out")"
# a conv's input gradient reads the weights it flips in place (codegen/kir_flip.c): weights that are inputs of the
# model are flipped at run time, as a training step's; the call packs them from the forward conv's, the flip
# kernel absorbed. Gradients against numpy (tests/flip_grads.py): the direct lanes row, with a block of 32 output
# channels partial (48), and Winograd (128 channels at 28x28, where this CPU's planner takes it). At 128 channels the
# weight gradients run as Winograd F(2x2, 3x3) too (runtime/conv/winograd.c, from 64 channels each side, any CPU)
for shape in "64 48 16 16" "32 64 14 14" "128 128 28 28"; do
  f=$tmp/flip-${shape// /x}
  mkdir -p "$f"
  python3 tests/flip_grads.py "$f" $shape
  "$B/primc" dump --kernels --grad "$f/model.onnx" >"$f/dump" 2>&1
  n=$(grep -c "read flipped from the weights of the conv whose input gradient" "$f/dump")
  if ! grep -q -E "(direct_lanes|winograd_f2x3) \(computed weights packed by each call" "$f/dump"; then
    skipped "flip read in place ($shape): this CPU's planner runs no conv here on the direct lanes or Winograd rows"
  else [ "$n" -ge 1 ] && ok "flip read in place ($shape): $n conv(s)" || bad "flip read in place ($shape)" "no conv reads its weights flipped"; fi
  if [ "$shape" = "128 128 28 28" ]; then
    n=$(grep -c "weight gradient as Winograd F(2x2, 3x3)" "$f/dump")
    [ "$n" -eq 2 ] && ok "both weight gradients as Winograd ($shape)" || bad "weight gradients as Winograd ($shape)" "$n of 2"
  fi
  for t in 1 2; do
    log=$f/t$t.log
    if "$B/primc" compile --grad "$f/model.onnx" -o "$f/g" >"$log" 2>&1 &&
      PRIMC_NUM_THREADS=$t "$f/g" "$f/input.npy" "$f/w1.npy" "$f/w2.npy" "$f/ct.npy" -o "$f/out$t" >>"$log" 2>&1 &&
      python3 tests/compare_grads.py "$f/out$t" "$f/grad.npz" 1 >>"$log" 2>&1; then
      ok "flipped weights' gradients ($shape, $t threads): $(tail -n 1 "$log")"
    else bad "flipped weights' gradients ($shape, $t threads)" "$(tail -n 3 "$log")"; fi
  done
done

# vmap: one compiled run over three inputs at once, each entry against ONNX Runtime on its own
for name in mlp resnet_tiny encoder_tiny lstm; do
  mkdir -p "$tmp/vmap-$name"
  if "$B/primc" compile "models/$name/model.onnx" --vmap input=3 -o "$tmp/vmap-$name/m" >"$tmp/vmap-$name.log" 2>&1 &&
    python3 tests/compare_vmap.py "models/$name" "$tmp/vmap-$name/m" "$tmp/vmap-$name" >>"$tmp/vmap-$name.log" 2>&1; then
    ok "vmap $name: $(tail -n 1 "$tmp/vmap-$name.log")"
  else bad "vmap $name" "$(tail -n 3 "$tmp/vmap-$name.log")"; fi
done

# --grad under --autocast bf16 (bf16 convs forward and backward, their computed weights packed per call): resnet_tiny's
# gradients within 1e-2 of the model's largest one of PyTorch's f32 gradients (bf16 operands, f32 sums; a gradient
# deep in the net carries the bf16 error of everything above it), and bf16's rounding seen (> 1e-5) somewhere
d=models/resnet_tiny
python3 -c "import numpy as np; np.save('$tmp/ct-bf16.npy', np.load('$d/grad.npz')['ct0'])"
if "$B/primc" compile --grad "$d/model.onnx" --autocast bf16 -o "$tmp/rt-bf16" >"$tmp/bf16.log" 2>&1 &&
  "$tmp/rt-bf16" "$d/input.npy" "$tmp/ct-bf16.npy" -o "$tmp/rt-bf16.out" >>"$tmp/bf16.log" 2>&1 &&
  python3 - "$tmp/rt-bf16.out" "$d/grad.npz" >>"$tmp/bf16.log" 2>&1 <<'PY'
import sys, numpy as np
out, ref = sys.argv[1], np.load(sys.argv[2])
keys = sorted((k for k in ref.files if k[0] == "g" and k[1:].isdigit()), key=lambda k: int(k[1:]))
top = max(float(np.abs(ref[k]).max()) for k in keys)
errs = [float(np.abs(np.load(f"{out}/out{1 + i}.npy").astype(np.float64) - ref[k]).max()) / top for i, k in enumerate(keys)]
print(f"{len(keys)} gradients, worst error {max(errs):.1e} of the largest gradient")
sys.exit(0 if max(errs) <= 1e-2 and max(errs) > 1e-5 else 1)
PY
then ok "--grad --autocast bf16 resnet_tiny: $(tail -n 1 "$tmp/bf16.log")"
else bad "--grad --autocast bf16 resnet_tiny" "$(tail -n 3 "$tmp/bf16.log")"; fi
# the classifier's dot a bf16 call; the convs on the bf16 row where the CPU's tuning says it pays. Without bf16 dot
# products (passes/autocast.c) every contraction is on the f32 rows, the weights' operands rounded to bf16
"$B/primc" dump "$d/model.onnx" --kernels --grad --autocast bf16 >"$tmp/k" 2>&1
if sed -n 2p "$tmp/k" | grep -q 'no bf16 dot products on this CPU'; then
  sed -n 2p "$tmp/k" | grep -q 'their operands rounded to bf16' && ! grep -q bf16 <(grep call "$tmp/k") &&
    ok "--grad --autocast bf16 without bf16 dot products: operands rounded, the f32 rows" ||
    bad "--grad --autocast bf16 kernels, no bf16 dot products" "$(head -n 2 "$tmp/k"; grep call "$tmp/k" | head -c 400)"
else
  grep -q 'call primc_k_dot_bf16' "$tmp/k" &&
    ok "--grad --autocast bf16: bf16 dots, $(grep -c 'conv row bf16_tiles' "$tmp/k") convs on bf16_tiles here" ||
    bad "--grad --autocast bf16 kernels" "$(grep call "$tmp/k" | head -c 400)"
fi

# ONNX's Gradient op (ai.onnx.preview.training) by the same reverse mode, interpreted and compiled, against
# derivatives written out in numpy (tests/ref/gen_gradient_op.py)
G=tests/data/grad
for how in interp compiled; do
  if [ $how = interp ]; then run=("$B/primc" run "$G/gradient_op.onnx" "$G/a.npy" "$G/b.npy" -o "$tmp/gop-$how")
  else "$B/primc" compile "$G/gradient_op.onnx" -o "$tmp/gop.exe" >"$tmp/gop.log" 2>&1; run=("$tmp/gop.exe" "$G/a.npy" "$G/b.npy" -o "$tmp/gop-$how"); fi
  okk=1
  "${run[@]}" >>"$tmp/gop.log" 2>&1 || okk=0
  for k in 0:y 1:da 2:dW; do
    [ $okk = 1 ] && python3 tests/compare_npy.py "$tmp/gop-$how/out${k%%:*}.npy" "$G/${k#*:}.npy" --rtol 1e-4 --atol 1e-5 >>"$tmp/gop.log" 2>&1 || okk=0
  done
  if [ $okk = 1 ]; then ok "Gradient op $how: y, dy/da, dy/dW as numpy's"; else bad "Gradient op $how" "$(tail -n 3 "$tmp/gop.log")"; fi
done

# the README's worked example: an MLP trained on the digits reaches 95% test accuracy (numpy measures it)
if python3 examples/train_digits/run.py --primc "$B/primc" --out "$tmp/digits" >"$tmp/digits.log" 2>&1; then
  ok "train_digits: $(tail -n 1 "$tmp/digits.log")"
else bad "train_digits" "$(tail -n 3 "$tmp/digits.log")"; fi

# one step interpreted: the first loss is torch's
python3 -c "import numpy as np; d = np.load('tests/data/train/mlp_ce_adamw.npz'); np.save('$tmp/x4.npy', d['x'][:4]); np.save('$tmp/y4.npy', d['y'][:4]); print(d['losses'][0])" >"$tmp/want" 2>&1
got=$("$B/primc" run --train --loss cross_entropy --optimizer adamw --lr 0.01 --weight-decay 0.1 models/mlp/model.onnx "$tmp/x4.npy" "$tmp/y4.npy" 2>&1 | awk '/^out0 loss/ {sub("sum=", "", $4); print $4}')
if python3 -c "import sys; a, b = float('$got'), float(open('$tmp/want').read()); sys.exit(abs(a - b) > 1e-4 * abs(b))" 2>/dev/null; then
  ok "run --train: the first step's loss is torch's ($got)"
else bad "run --train: the first step's loss is torch's" "got '$got', torch $(cat "$tmp/want")"; fi
expect_exit 1 "--train for cuda is refused" "$B/primc" compile models/mlp/model.onnx --train --target cuda -o "$tmp/x"
expect_exit 1 "--optimizer without --train" "$B/primc" compile models/mlp/model.onnx --optimizer adam -o "$tmp/x"
expect_exit 2 "an unknown --optimizer" "$B/primc" compile models/mlp/model.onnx --train --optimizer rmsprop -o "$tmp/x"

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
