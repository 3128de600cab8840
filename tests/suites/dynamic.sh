#!/usr/bin/env bash
# tests/suites/dynamic.sh: run-time dims (--dim NAME=LO..HI, and in buckets LO..HI:STEP). Each model of models/dynamic/ is compiled once with
# the ranges in its dims.txt and run at every size it has a case for (in_TAG.npy), as an executable and embedded
# through its header (tests/embed/dynamic.c), each output compared with ONNX Runtime's at that size
# (expected_TAG.npy, models/dynamic/make.py). Sizes outside the range, a fixed dim given another value, a model
# whose program changes with the dim (an RNN unrolled over it) are refused with messages that name them. The same
# ranges, and buckets, compile for CUDA; on a GPU they run at each size against ONNX Runtime. With PRIMC_LARGE=1 (make test-large) also BERT-base and ResNet-50 sized models (below), ResNet-50 over image sizes too.
set -u
B=${B:-build}
. tests/suite_lib.sh

compare() { python3 tests/compare_npy.py "$1" "$2" --rtol 1e-4 --atol 1e-5 >"$tmp/cmp" 2>&1; }
# each shape against ONNX Runtime on random inputs (tests/run_sizes.py): NAME MODEL EXE SHAPES...
sizes() {
  local name=$1 model=$2 exe=$3
  shift 3
  mkdir -p "$tmp/sizes"
  python3 tests/run_sizes.py "$model" "$exe" "$tmp/sizes" "$@" >"$tmp/sizes.log" 2>&1
  while read -r verdict rest; do
    case $verdict in PASS) ok "$name $rest" ;; FAIL) bad "$name" "$rest" ;; esac
  done <"$tmp/sizes.log"
}

for d in models/dynamic/*/; do
  [ -f "$d/model.onnx" ] || continue
  name=$(basename "$d")
  # shellcheck disable=SC2046
  if ! "$B/primc" compile "$d/model.onnx" $(cat "$d/dims.txt") -o "$tmp/$name" --report >"$tmp/report" 2>&1; then
    bad "$name compiles once" "$(tail -n 3 "$tmp/report")"
    continue
  fi
  if grep -q 'run-time dims: [0-9]* sizes follow them' "$tmp/report"; then ok "$name: --report names the run-time dims"
  else bad "$name: --report" "no run-time dims line"; fi
  # shellcheck disable=SC2046
  "$B/primc" compile "$d/model.onnx" $(cat "$d/dims.txt") --emit obj --name dm -o "$tmp/dm.o" >"$tmp/log" 2>&1 &&
    cc -std=c11 -O2 -I"$tmp" -I. -DMODEL_HEADER='"dm.h"' -DMODEL=dm tests/embed/dynamic.c "$tmp/dm.o" \
      "$B/libprimc_rt.a" ${PRIMC_LDFLAGS:-} -lm -lpthread -o "$tmp/app" >>"$tmp/log" 2>&1 || bad "$name embedded" "$(tail -n 3 "$tmp/log")"
  for e in "$d"/expected_*.npy; do
    tag=$(basename "$e" .npy)
    tag=${tag#expected_}
    ins=("$d"/in_"$tag"_*.npy)
    if "$tmp/$name" "${ins[@]}" -o "$tmp/out-$tag" >"$tmp/log" 2>&1 && compare "$tmp/out-$tag/out0.npy" "$e"; then
      ok "$name at $tag: $(tail -n 1 "$tmp/cmp")"
    else
      bad "$name at $tag" "$(tail -n 2 "$tmp/log") $(tail -n 2 "$tmp/cmp" 2>/dev/null)"
    fi
    if [ -x "$tmp/app" ] && "$tmp/app" "$tmp/emb-$tag.npy" "${ins[@]}" >"$tmp/log" 2>&1 && compare "$tmp/emb-$tag.npy" "$e"; then
      ok "$name embedded at $tag: $(tail -n 1 "$tmp/log")"
    else
      bad "$name embedded at $tag" "$(tail -n 2 "$tmp/log") $(tail -n 2 "$tmp/cmp" 2>/dev/null)"
    fi
  done
  rm -f "$tmp/app"
done

# refusals: one past a bound, a fixed dim changed (the executable names the input, the dim, the value, the range)
python3 -c "import numpy as np; np.save('$tmp/big.npy', np.zeros((9, 3, 64, 64), np.float32)); np.save('$tmp/wide.npy', np.zeros((2, 3, 64, 65), np.float32))"
if [ -x "$tmp/batch_cnn" ]; then
  expect_exit 1 "batch 9 of 1..8 refused" "$tmp/batch_cnn" "$tmp/big.npy"
  grep -q 'input "input" dim 0 (N) is 9, outside the range 1..8' "$tmp/err" && ok "its message" || bad "its message" "$(cat "$tmp/err")"
  expect_exit 1 "a fixed dim changed refused" "$tmp/batch_cnn" "$tmp/wide.npy"
  grep -q 'dim 3 is 65, the model was compiled for 64' "$tmp/err" && ok "its message" || bad "its message" "$(cat "$tmp/err")"
fi

expect_exit 1 "bench with a range refused" "$B/primc" bench models/dynamic/batch_cnn/model.onnx --dim N=1..8
grep -q 'bench times one size: give --dim N=VALUE' "$tmp/err" && ok "its message" || bad "its message" "$(cat "$tmp/err")"

# two inputs disagreeing on a run-time dim
if [ -x "$tmp/seq_encoder" ]; then
  expect_exit 1 "inputs disagreeing on seq refused" "$tmp/seq_encoder" models/dynamic/seq_encoder/in_1x7_0.npy \
    models/dynamic/seq_encoder/in_1x1_1.npy
  grep -q 'input "attention_mask" dim 1 is 1, but input "input_ids" made seq 7' "$tmp/err" && ok "its message" ||
    bad "its message" "$(cat "$tmp/err")"
fi

# a training step with its batch a range: models/mlp with batch N, compiled with --dim N=1..4 (and in buckets of
# 2), trains at the bound like the fixed model: its losses and weights are torch.optim's (tests/compare_train.py;
# the Python test test_training_step_over_a_range_of_batch_sizes runs batches of other sizes)
python3 - "$tmp/mlp_n.onnx" <<'PY'
import sys, onnx
m = onnx.load("models/mlp/model.onnx")
for v in (m.graph.input[0], m.graph.output[0]):
    v.type.tensor_type.shape.dim[0].ClearField("dim_value")
    v.type.tensor_type.shape.dim[0].dim_param = "N"
onnx.save(m, sys.argv[1])
PY
for dim in N=1..4 N=1..4:2 "N=1..8 --run --batch 4" "N=1..8:4 --run --batch 4"; do
  mkdir -p "$tmp/train"
  # shellcheck disable=SC2086
  if python3 tests/compare_train.py "$B/primc" tests/data/train/mlp_mse_sgd.npz "$tmp/train" "$tmp/mlp_n.onnx" \
    --dim $dim >"$tmp/train.log" 2>&1; then
    ok "a training step over --dim $dim: $(tail -n 1 "$tmp/train.log")"
  else bad "a training step over --dim $dim" "$(tail -n 4 "$tmp/train.log")"; fi
done
# --batch: within the range, on a step compiled with its batch a range only; -o writes the outputs at that batch
python3 -c "import numpy as np; np.save('$tmp/tx.npy', np.ones((5, 64), np.float32)); np.save('$tmp/ty.npy', np.ones((5, 10), np.float32))"
"$B/primc" compile "$tmp/mlp_n.onnx" --dim N=1..8 --train -o "$tmp/trn" >"$tmp/log" 2>&1 || bad "compile a step over N=1..8" "$(cat "$tmp/log")"
expect_exit 0 "--batch 3 runs" "$tmp/trn" "$tmp/tx.npy" "$tmp/ty.npy" --batch 3 --steps 2 -o "$tmp/trout"
python3 -c "import numpy as np, sys; sys.exit(np.load('$tmp/trout/out1.npy').shape != (3, 10))" &&
  ok "its -o output is [3, 10]" || bad "its -o output is [3, 10]" "$(python3 -c "import numpy as np; print(np.load('$tmp/trout/out1.npy').shape)")"
expect_exit 1 "--batch 9 of 1..8 refused" "$tmp/trn" "$tmp/tx.npy" "$tmp/ty.npy" --batch 9
grep -q 'error: --batch 9: input "input" dim 0 (N) is 9, outside the range 1..8 compiled in' "$tmp/err" &&
  ok "its message" || bad "its message" "$(cat "$tmp/err")"
# --epochs: passes over the datasets in order, each ending with the rows left over (8 rows in batches of 3: 3, 3 and
# 2), as torch.optim's steps on the same batches (tests/data/train_epochs.npz; batches of 3 wrapping over the
# epochs differ from step 3 on); --drop-last skips the rest; an epoch's last batch outside the range is refused
for dim in N=1..8 N=1..8:4; do
  if python3 tests/compare_train.py "$B/primc" tests/data/train_epochs.npz "$tmp/train" "$tmp/mlp_n.onnx" --dim $dim \
    --run --batch 3 --epochs 2 >"$tmp/train.log" 2>&1; then
    ok "--epochs 2 of 8 rows in batches of 3 over --dim $dim: $(tail -n 1 "$tmp/train.log")"
  else bad "--epochs 2 over --dim $dim" "$(tail -n 4 "$tmp/train.log")"; fi
done
# --shuffle 7: each epoch's rows in the order of the next np.random.RandomState(7).permutation(8), as torch.optim's
# steps on those batches (tests/data/train_shuffle.npz; in order they differ from step 1 on)
for dim in N=1..8 N=1..8:4; do
  if python3 tests/compare_train.py "$B/primc" tests/data/train_shuffle.npz "$tmp/train" "$tmp/mlp_n.onnx" --dim $dim \
    --run --batch 3 --epochs 2 --shuffle 7 >"$tmp/train.log" 2>&1; then
    ok "--epochs 2 --shuffle 7 over --dim $dim: $(tail -n 1 "$tmp/train.log")"
  else bad "--epochs 2 --shuffle 7 over --dim $dim" "$(tail -n 4 "$tmp/train.log")"; fi
done
expect_exit 2 "--shuffle without --epochs refused" "$tmp/trn" "$tmp/tx.npy" "$tmp/ty.npy" --shuffle 7
expect_exit 2 "--shuffle -1 refused" "$tmp/trn" "$tmp/tx.npy" "$tmp/ty.npy" --epochs 1 --shuffle -1
"$tmp/trn" "$tmp/tx.npy" "$tmp/ty.npy" --batch 3 --epochs 2 >"$tmp/log" 2>&1 &&
  grep -q '^epoch 2 loss .* (2 batches, 5 rows)$' "$tmp/log" && [ "$(grep -c '^step ' "$tmp/log")" = 4 ] &&
  ok "--epochs: 2 steps an epoch of 5 rows, its loss over them" || bad "--epochs of 5 rows" "$(cat "$tmp/log")"
"$tmp/trn" "$tmp/tx.npy" "$tmp/ty.npy" --batch 3 --epochs 2 --drop-last >"$tmp/log" 2>&1 &&
  grep -q '^epoch 2 loss .* (1 batch, 3 rows)$' "$tmp/log" && ok "--drop-last: 1 step an epoch" ||
  bad "--drop-last" "$(cat "$tmp/log")"
expect_exit 2 "--steps with --epochs refused" "$tmp/trn" "$tmp/tx.npy" "$tmp/ty.npy" --epochs 2 --steps 3
"$B/primc" compile "$tmp/mlp_n.onnx" --dim N=3..8 --train -o "$tmp/trn3" >"$tmp/log" 2>&1 || bad "compile a step over N=3..8" "$(cat "$tmp/log")"
expect_exit 1 "an epoch's last batch outside the range refused" "$tmp/trn3" "$tmp/tx.npy" "$tmp/ty.npy" --batch 3 --epochs 1
grep -q 'ends with one of 2: input "input" dim 0 (N) is 2, outside the range 3..8 compiled in (or give --drop-last' "$tmp/err" &&
  ok "its message" || bad "its message" "$(cat "$tmp/err")"
"$B/primc" compile models/mlp/model.onnx --train -o "$tmp/tr4" >"$tmp/log" 2>&1 || bad "compile a step at batch 4" "$(cat "$tmp/log")"
expect_exit 1 "--batch on a step compiled for one batch refused" "$tmp/tr4" "$tmp/tx.npy" "$tmp/ty.npy" --batch 3
grep -q 'error: --batch 3: .* was compiled for batch 4 of input input (compile the step with its batch a range' "$tmp/err" &&
  ok "its message" || bad "its message" "$(cat "$tmp/err")"

# a program that is not the same at every size: the LSTM unrolled over its sequence
python3 - "$tmp/lstm.onnx" <<'PY'
import sys, onnx
m = onnx.load("models/lstm/model.onnx")
for v in list(m.graph.input) + list(m.graph.output):
    d = v.type.tensor_type.shape.dim[0]
    d.ClearField("dim_value")
    d.dim_param = "T"
onnx.save(m, sys.argv[1])
PY
expect_exit 1 "an RNN over a run-time dim refused" "$B/primc" compile "$tmp/lstm.onnx" --dim T=1..6 -o "$tmp/lstm"
grep -q 'dim T: the number of kernels follows it' "$tmp/err" && ok "its message" || bad "its message" "$(cat "$tmp/err")"

# a concatenation over channels whose parts the memory plan would place in the result (passes/memplan.c): with H
# and W at run time the parts' offsets follow them, so each is copied in (it was written at the bounds' offset)
python3 - "$tmp/cat.onnx" <<'PY'
import sys, numpy as np, onnx
from onnx import helper, TensorProto, numpy_helper
r = np.random.default_rng(1)
w = [numpy_helper.from_array(r.standard_normal(s).astype(np.float32), n)
     for n, s in (("wa", (4, 3, 3, 3)), ("wb", (5, 3, 3, 3)), ("wc", (2, 9, 1, 1)))]
x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, "H", "W"])
y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 2, "H", "W"])
nodes = [helper.make_node("Conv", ["x", "wa"], ["a"], pads=[1, 1, 1, 1]), helper.make_node("Relu", ["a"], ["ra"]),
         helper.make_node("Conv", ["x", "wb"], ["b"], pads=[1, 1, 1, 1]), helper.make_node("Sigmoid", ["b"], ["sb"]),
         helper.make_node("Concat", ["ra", "sb"], ["c"], axis=1), helper.make_node("Conv", ["c", "wc"], ["y"])]
onnx.save(helper.make_model(helper.make_graph(nodes, "g", [x], [y], w), opset_imports=[helper.make_opsetid("", 13)]), sys.argv[1])
PY
if "$B/primc" compile "$tmp/cat.onnx" --dim H=4..16 --dim W=4..16 -o "$tmp/cat" >"$tmp/log" 2>&1; then
  ok "a channel concat over H=4..16, W=4..16 compiles"
  sizes "channel concat over H, W" "$tmp/cat.onnx" "$tmp/cat" 1x3x5x7 1x3x9x4 1x3x16x16
else
  bad "a channel concat over H, W compiles" "$(tail -n 3 "$tmp/log")"
fi

# strided convs and pools over image sizes (models/dynamic/strided_cnn, run above in multiples of 16): their
# output sizes floor((H + 2p - k) / s) + 1 follow no polynomial over every H, so a plain range is refused with the
# way out named; a size that is no multiple is refused by the executable; multiples and buckets do not combine
sc=models/dynamic/strided_cnn/model.onnx
expect_exit 1 "strided convs over H=16..96 refused" "$B/primc" compile "$sc" --dim H=16..96 --dim W=16..96 -o "$tmp/sc"
grep -q "MaxPool #2: slice: dim H: .*or in multiples of its strides' product, for a strided conv's or pool's sizes (--dim H=LO..HI%M)" "$tmp/err" &&
  ok "its message names the way out" || bad "its message names the way out" "$(cat "$tmp/err")"
python3 -c "import numpy as np; np.save('$tmp/h40.npy', np.zeros((1, 3, 40, 48), np.float32))"
if [ -x "$tmp/strided_cnn" ]; then
  expect_exit 1 "H = 40 of 16..96%16 refused" "$tmp/strided_cnn" "$tmp/h40.npy"
  grep -q 'input "x" dim 2 (H) is 40, not a multiple of 16 (the range 16..96 compiled in)' "$tmp/err" &&
    ok "its message" || bad "its message" "$(cat "$tmp/err")"
fi
# the CPU header's comments and macros name each input dim's range (and multiple)
for spec in "models/dynamic/batch_cnn/model.onnx|--dim N=1..8|f32[N=1..8,3,64,64]|#define hc_DIM0_MULTIPLE 1LL" \
  "$sc|--dim H=16..96%16 --dim W=16..96%16|f32[1,3,H=16..96%16,W=16..96%16]|#define hc_DIM0_MULTIPLE 16LL"; do
  IFS='|' read -r model dims comment macro <<<"$spec"
  # shellcheck disable=SC2086
  if "$B/primc" compile "$model" $dims --emit obj --name hc -o "$tmp/hc.o" >"$tmp/log" 2>&1 &&
    grep -qF "$comment" "$tmp/hc.h" && grep -qF "$macro" "$tmp/hc.h"; then ok "header for $dims: $comment"
  else bad "header for $dims" "$(grep -F 'input 0' "$tmp/hc.h" 2>/dev/null) $(tail -n 2 "$tmp/log")"; fi
done
expect_exit 2 "a range that is no multiple refused" "$B/primc" compile "$sc" --dim H=20..96%16 -o "$tmp/sc"
expect_exit 2 "buckets that are no multiple refused" "$B/primc" compile "$sc" --dim H=16..96%16:24 -o "$tmp/sc"
# the buckets' weights pool is a temporary file in TMPDIR: one that cannot be made there is an error naming it
expect_exit 1 "buckets with TMPDIR missing refused" env TMPDIR="$tmp/no-such-dir" "$B/primc" compile "$sc" \
  --dim H=16..96%16:32 --dim W=16..96%16 -o "$tmp/sct"
grep -q "cannot make a temporary file in '$tmp/no-such-dir' (TMPDIR)" "$tmp/err" && ok "its message names TMPDIR" ||
  bad "the TMPDIR message" "$(cat "$tmp/err")"
# in buckets of multiples (H=16..32, 48..64, 80..96): each case against ONNX Runtime, on a GPU too
if "$B/primc" compile "$sc" --dim H=16..96%16:32 --dim W=16..96%16 -o "$tmp/scb" --report >"$tmp/report" 2>&1; then
  grep -q 'H=48..64: ' "$tmp/report" && ok "strided_cnn in buckets of multiples: --report lists H=48..64" ||
    bad "strided_cnn buckets in --report" "$(grep -A4 buckets "$tmp/report")"
  for e in models/dynamic/strided_cnn/expected_*.npy; do
    tag=$(basename "$e" .npy)
    tag=${tag#expected_}
    if "$tmp/scb" "models/dynamic/strided_cnn/in_${tag}_0.npy" -o "$tmp/scbo" >"$tmp/log" 2>&1 &&
      compare "$tmp/scbo/out0.npy" "$e"; then ok "strided_cnn in buckets at $tag: $(tail -n 1 "$tmp/cmp")"
    else bad "strided_cnn in buckets at $tag" "$(tail -n 2 "$tmp/log") $(tail -n 2 "$tmp/cmp" 2>/dev/null)"; fi
  done
  expect_exit 1 "H = 40 refused by the buckets" "$tmp/scb" "$tmp/h40.npy"
  grep -q 'input "x" dim 2 (H) is 40, not a multiple of 16 (the range 16..96 compiled in)' "$tmp/err" &&
    ok "its message" || bad "its message" "$(cat "$tmp/err")"
else
  bad "strided_cnn in buckets of multiples compiles" "$(tail -n 3 "$tmp/report")"
fi

# a mean over the range dim: its N (or 1/N) is a float constant that follows it. The CPU program computes it from
# the dim as the build did (a whole number or its reciprocal, fitted through the number); the CUDA C writes 1/N as
# (float)(1.0 / N) with N an integer fitted like any size
python3 - "$tmp/mean.onnx" <<'PY'
import sys, onnx
from onnx import helper, TensorProto
x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 16])
y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 16])
g = helper.make_graph([helper.make_node("ReduceMean", ["x"], ["y"], axes=[0], keepdims=1)], "g", [x], [y])
onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), sys.argv[1])
PY
if "$B/primc" compile "$tmp/mean.onnx" --dim N=1..8 -o "$tmp/mean" >"$tmp/log" 2>&1; then
  ok "a mean over the range dim compiles"
  sizes "mean over N" "$tmp/mean.onnx" "$tmp/mean" 1x16 3x16 5x16 8x16
else
  bad "a mean over the range dim compiles" "$(tail -n 3 "$tmp/log")"
fi
# a CNN over any image size (GlobalAveragePool's 1/(H W) follows both dims) is models/dynamic/image_cnn, run above
# and, for CUDA, below. A float that follows the dim and is no N or 1/N (x / sqrt(N)) is refused, on CUDA too
python3 - "$tmp/sqrt.onnx" <<'PY'
import sys, onnx
from onnx import helper, TensorProto
x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 16])
y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 16])
nodes = [helper.make_node("Shape", ["x"], ["s"]), helper.make_node("Gather", ["s", "zero"], ["n"], axis=0),
         helper.make_node("Cast", ["n"], ["nf"], to=TensorProto.FLOAT), helper.make_node("Sqrt", ["nf"], ["q"]),
         helper.make_node("Div", ["x", "q"], ["y"])]
g = helper.make_graph(nodes, "g", [x], [y], [helper.make_tensor("zero", TensorProto.INT64, [], [0])])
onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), sys.argv[1])
PY
expect_exit 1 "x / sqrt(N) over a range refused" "$B/primc" compile "$tmp/sqrt.onnx" --dim N=1..8 -o "$tmp/sqrt"
grep -q 'Div #4: broadcast_in_dim: dim N: the program compiled at N=[0-9]* differs from the one at the bound, not only in its sizes (another kernel or row, a constant that follows it)' "$tmp/err" &&
  ok "its message" || bad "its message" "$(cat "$tmp/err")"
expect_exit 1 "x / sqrt(N) over a range refused on CUDA" "$B/primc" compile "$tmp/sqrt.onnx" --dim N=1..8 --target cuda -o "$tmp/sqrt"
grep -q 'Div #4: broadcast_in_dim: dim N: the CUDA program at N=[0-9]* differs from the one at the bound, not only in its sizes (another kernel, row or launch; a float that follows it)' "$tmp/err" &&
  ok "its message" || bad "its message" "$(cat "$tmp/err")"

# CUDA: each model compiled once with its ranges (the kernels take the dims as arguments: codegen/cuda_dynamic.c;
# NVRTC needed, else skipped); on a GPU run at every case against ONNX Runtime, as a stream and as a CUDA graph, and
# one past a bound refused (before the GPU is asked for); without one the executable's own "needs a CUDA GPU" skips the runs (the emulator runs
# these programs in the unit test cuda_emu_run_time_dims)
if ! "$B/primc" compile --target cuda --nvrtc-check models/mlp/model.onnx >"$tmp/nv" 2>&1 && grep -q 'NVRTC not found' "$tmp/nv"; then
  skipped "CUDA run-time dims: NVRTC not found"
else
  for d in models/dynamic/*/; do
    [ -f "$d/model.onnx" ] || continue
    name=$(basename "$d")
    # shellcheck disable=SC2046
    if ! "$B/primc" compile "$d/model.onnx" $(cat "$d/dims.txt") --target cuda -o "$tmp/cu-$name" --report >"$tmp/report" 2>&1; then
      bad "$name compiles once for CUDA" "$(tail -n 3 "$tmp/report")"
      continue
    fi
    grep -q 'run-time dims: [0-9]* sizes follow them' "$tmp/report" && ok "$name compiles once for CUDA, --report names the run-time dims" ||
      bad "$name CUDA --report" "no run-time dims line"
    for e in "$d"/expected_*.npy; do
      tag=$(basename "$e" .npy)
      tag=${tag#expected_}
      ins=("$d"/in_"$tag"_*.npy)
      for graphs in --no-cuda-graphs ""; do
        rm -rf "$tmp/cuout"
        "$tmp/cu-$name" "${ins[@]}" -o "$tmp/cuout" $graphs >"$tmp/log" 2>&1
        rc=$?
        if [ "$rc" -eq 1 ] && grep -q 'needs a CUDA GPU' "$tmp/log"; then
          skipped "$name on CUDA at $tag $graphs: no GPU"
        elif [ "$rc" -eq 0 ] && compare "$tmp/cuout/out0.npy" "$e"; then
          ok "$name on CUDA at $tag $graphs: $(tail -n 1 "$tmp/cmp")"
        else
          bad "$name on CUDA at $tag $graphs" "$(tail -n 2 "$tmp/log") $(tail -n 2 "$tmp/cmp" 2>/dev/null)"
        fi
      done
    done
  done
  if [ -x "$tmp/cu-batch_cnn" ]; then # checked before the GPU is asked for
    expect_exit 1 "CUDA batch 9 of 1..8 refused" "$tmp/cu-batch_cnn" "$tmp/big.npy"
    grep -q 'input "input" dim 0 (N) is 9, outside the range 1..8' "$tmp/err" && ok "its message" || bad "its message" "$(cat "$tmp/err")"
  fi
  # buckets on CUDA: a module per bucket behind one dispatcher (codegen/cuda_buckets.c); on a GPU each bucket's ends
  # against ONNX Runtime, without one a size out of range still refused (the unit test cuda_pkg_buckets checks the
  # dispatch without a GPU)
  if "$B/primc" compile models/dynamic/seq_encoder/model.onnx --dim batch=2 --dim seq=9..32:8 --target cuda \
    -o "$tmp/cubk" --report >"$tmp/report" 2>&1; then
    grep -q 'buckets of seq: 3 CUDA programs (STEP 8)' "$tmp/report" &&
      grep -q 'seq=25..32: .*(the weights of seq=9..16)' "$tmp/report" && ok "encoder in CUDA buckets: --report lists them" ||
      bad "CUDA buckets in --report" "$(grep -A5 buckets "$tmp/report")"
    python3 -c "import numpy as np; np.save('$tmp/ids9.npy', np.ones((2, 9), np.int64)); np.save('$tmp/ids33.npy', np.ones((2, 33), np.int64))"
    "$tmp/cubk" "$tmp/ids9.npy" "$tmp/ids9.npy" >"$tmp/log" 2>&1
    if [ $? -eq 1 ] && grep -q 'needs a CUDA GPU' "$tmp/log"; then
      skipped "encoder in CUDA buckets at seq 9..32: no GPU"
    else
      sizes "encoder in CUDA buckets" models/dynamic/seq_encoder/model.onnx "$tmp/cubk" 2x9,2x9 2x16,2x16 2x17,2x17 \
        2x24,2x24 2x25,2x25 2x32,2x32
    fi
    expect_exit 1 "CUDA buckets: seq 33 of 9..32 refused" "$tmp/cubk" "$tmp/ids33.npy" "$tmp/ids33.npy"
    grep -q 'input "input_ids" dim 1 (seq) is 33, outside the range 9..32' "$tmp/err" && ok "its message" ||
      bad "its message" "$(cat "$tmp/err")"
  else
    bad "encoder in CUDA buckets compiles" "$(tail -n 3 "$tmp/report")"
  fi
  # buckets on H and W for CUDA, 4 boxes of 48 by 48 (the unit test cuda_pkg_buckets_on_two_dims checks their
  # dispatch and header without a GPU): on a GPU each case against ONNX Runtime
  scd=models/dynamic/strided_cnn
  if [ -x "$tmp/cu-strided_cnn" ] && "$tmp/cu-strided_cnn" $scd/in_1x3x16x16_0.npy -o "$tmp/cuout" >/dev/null 2>&1; then
    if "$B/primc" compile $scd/model.onnx --dim H=16..96%16:48 --dim W=16..96%16:48 --target cuda -o "$tmp/cuhw" \
      >"$tmp/log" 2>&1; then
      for e in $scd/expected_*.npy; do
        tag=$(basename "$e" .npy)
        tag=${tag#expected_}
        rm -rf "$tmp/cuout"
        "$tmp/cuhw" $scd/in_${tag}_0.npy -o "$tmp/cuout" >"$tmp/log" 2>&1 && compare "$tmp/cuout/out0.npy" "$e" &&
          ok "strided_cnn in CUDA boxes of H and W at $tag: $(tail -n 1 "$tmp/cmp")" ||
          bad "strided_cnn in CUDA boxes of H and W at $tag" "$(tail -n 2 "$tmp/log") $(tail -n 2 "$tmp/cmp" 2>/dev/null)"
      done
    else bad "strided_cnn in CUDA boxes of H and W compiles" "$(tail -n 3 "$tmp/log")"; fi
  else
    skipped "strided_cnn in CUDA boxes of H and W: no GPU"
  fi
  expect_exit 1 "--emit cuda (one program's CUDA C) with buckets refused" "$B/primc" compile \
    models/dynamic/seq_encoder/model.onnx --dim batch=2 --dim seq=9..32:8 --emit cuda -o "$tmp/bk.cu"
  grep -q 'each bucket is a CUDA module of its own, which --target cuda packages' "$tmp/err" && ok "its message" ||
    bad "its message" "$(cat "$tmp/err")"
fi

# buckets (--dim NAME=LO..HI:STEP): a program per bucket, halved where one program cannot follow the dims (the
# encoder's rows change at small seq, the LSTM's kernels with every T); sizes at each bucket's ends against ONNX
# Runtime, as an executable, an object and a shared library through the header
enc=models/dynamic/seq_encoder
if "$B/primc" compile $enc/model.onnx --dim batch=2 --dim seq=1..32:8 -o "$tmp/bk" --report >"$tmp/report" 2>&1; then
  ok "encoder in buckets of seq compiles"
  grep -q 'buckets of seq: 5 programs (STEP 8; halved where one program could not follow the dims)' "$tmp/report" &&
    grep -q 'seq=1..4: .*(weights 0.43 MB, 0.43 MB of them new)' "$tmp/report" &&
    grep -q 'seq=25..32: .*(weights 0.43 MB, 0.00 MB of them new)' "$tmp/report" &&
    ok "--report lists the buckets, the later ones reading the first one's weights" ||
    bad "--report lists the buckets" "$(grep -A7 buckets "$tmp/report")"
  sizes "encoder in buckets" $enc/model.onnx "$tmp/bk" 2x1,2x1 2x4,2x4 2x5,2x5 2x8,2x8 2x9,2x9 2x16,2x16 2x17,2x17 \
    2x25,2x25 2x32,2x32
  python3 -c "import numpy as np; np.save('$tmp/ids33.npy', np.zeros((2, 33), np.int64))"
  expect_exit 1 "seq 33 of 1..32 refused by the buckets" "$tmp/bk" "$tmp/ids33.npy" "$tmp/ids33.npy"
  grep -q 'input "input_ids" dim 1 (seq) is 33, outside the range 1..32' "$tmp/err" && ok "its message" ||
    bad "its message" "$(cat "$tmp/err")"
else
  bad "encoder in buckets of seq compiles" "$(tail -n 3 "$tmp/report")"
fi
for kind in obj lib; do
  out=$tmp/bkdm.o hdr=bkdm.h link=$tmp/bkdm.o
  [ $kind = lib ] && out=$tmp/libbkdm.so hdr=libbkdm.h link="$tmp/libbkdm.so -Wl,-rpath,$tmp"
  # shellcheck disable=SC2086
  "$B/primc" compile $enc/model.onnx --dim batch=2 --dim seq=1..32:8 --emit $kind --name bkdm -o "$out" >"$tmp/log" 2>&1 &&
    cc -std=c11 -O2 -I"$tmp" -I. -DMODEL_HEADER="\"$hdr\"" -DMODEL=bkdm tests/embed/dynamic.c $link "$B/libprimc_rt.a" \
      ${PRIMC_LDFLAGS:-} -lm -lpthread -o "$tmp/app" >>"$tmp/log" 2>&1 &&
    "$tmp/app" "$tmp/emb.npy" $enc/in_2x13_0.npy $enc/in_2x13_1.npy >>"$tmp/log" 2>&1 &&
    compare "$tmp/emb.npy" $enc/expected_2x13.npy && ok "buckets embedded ($kind) at 2x13: $(tail -n 1 "$tmp/cmp")" ||
    bad "buckets embedded ($kind)" "$(tail -n 3 "$tmp/log") $(tail -n 2 "$tmp/cmp" 2>/dev/null)"
  grep -q '#define bkdm_NUM_BUCKETS 5' "$tmp/$hdr" && grep -q '#define bkdm_BUCKET_MAX {4, 8, 16, 24, 32}' "$tmp/$hdr" &&
    ok "the $kind header declares the buckets" || bad "the $kind header declares the buckets" "$(grep BUCKET "$tmp/$hdr")"
  rm -f "$tmp/app"
done
if "$B/primc" compile "$tmp/lstm.onnx" --dim T=1..6:2 -o "$tmp/bklstm" >"$tmp/log" 2>&1; then
  ok "an RNN over T in buckets compiles (a program per value)"
  sizes "LSTM in buckets" "$tmp/lstm.onnx" "$tmp/bklstm" 1x2x16 2x2x16 3x2x16 4x2x16 5x2x16 6x2x16
else
  bad "an RNN over T in buckets compiles" "$(tail -n 3 "$tmp/log")"
fi
# buckets on two dims: a program per box of batch and seq (every combination), a box that one program cannot follow
# halved along the dim its fit names (here batch: 1 and 2 plan other rows; halving seq first made 38 programs);
# sizes in boxes across the grid against ONNX Runtime
if "$B/primc" compile $enc/model.onnx --dim batch=1..4:2 --dim seq=1..32:8 -o "$tmp/bk2" --report >"$tmp/report" 2>&1; then
  n=$(sed -n 's/.*buckets of batch and seq: \([0-9]*\) programs (STEP 2 and 8.*/\1/p' "$tmp/report")
  [ -n "$n" ] && [ "$n" -ge 8 ] && [ "$n" -le 16 ] && grep -q '    batch=3..4, seq=25..32: ' "$tmp/report" &&
    ok "encoder in buckets of batch and seq: $n programs" || bad "buckets of batch and seq in --report" "$(grep -A5 buckets "$tmp/report")"
  sizes "encoder in buckets of batch and seq" $enc/model.onnx "$tmp/bk2" 1x1,1x1 1x8,1x8 2x3,2x3 2x9,2x9 3x13,3x13 \
    4x32,4x32 1x25,1x25 3x1,3x1
else
  bad "encoder in buckets of batch and seq compiles" "$(tail -n 3 "$tmp/report")"
fi
# buckets of multiples on H and W (models/dynamic/strided_cnn): 9 boxes of 32 by 32, the header declaring them, each
# case against ONNX Runtime as an executable and embedded; then boxes of one value each (36), where no program says
# which input dim is which symbol: the non-square cases show H and W were not swapped
scd=models/dynamic/strided_cnn
if "$B/primc" compile $scd/model.onnx --dim H=16..96%16:32 --dim W=16..96%16:32 -o "$tmp/schw" --report >"$tmp/report" 2>&1 &&
  "$B/primc" compile $scd/model.onnx --dim H=16..96%16:32 --dim W=16..96%16:32 --emit obj --name hw -o "$tmp/hw.o" >"$tmp/log" 2>&1 &&
  cc -std=c11 -O2 -I"$tmp" -I. -DMODEL_HEADER='"hw.h"' -DMODEL=hw tests/embed/dynamic.c "$tmp/hw.o" "$B/libprimc_rt.a" \
    ${PRIMC_LDFLAGS:-} -lm -lpthread -o "$tmp/app" >>"$tmp/log" 2>&1; then
  grep -q 'buckets of H and W: 9 programs (STEP 32 and 32)' "$tmp/report" && grep -q '    H=48..64, W=80..96: ' "$tmp/report" &&
    ok "strided_cnn in buckets of H and W: --report lists 9 boxes" || bad "H, W buckets in --report" "$(grep -A10 buckets "$tmp/report")"
  grep -q '#define hw_NUM_BUCKET_DIMS 2' "$tmp/hw.h" && grep -q '#define hw_BUCKET_DIMS {0, 1}' "$tmp/hw.h" &&
    grep -q '#define hw_BUCKET_MIN {{16, 16}, {16, 48}, {16, 80}, {48, 16},' "$tmp/hw.h" &&
    grep -q '#define hw_BUCKET_MAX {{32, 32}, {32, 64}, {32, 96}, {64, 32},' "$tmp/hw.h" &&
    ok "the header declares the boxes" || bad "the header declares the boxes" "$(grep -A8 'buckets (' "$tmp/hw.h")"
  for e in $scd/expected_*.npy; do
    tag=$(basename "$e" .npy)
    tag=${tag#expected_}
    if "$tmp/schw" "$scd/in_${tag}_0.npy" -o "$tmp/scbo" >"$tmp/log" 2>&1 && compare "$tmp/scbo/out0.npy" "$e" &&
      "$tmp/app" "$tmp/emb.npy" "$scd/in_${tag}_0.npy" >>"$tmp/log" 2>&1 && compare "$tmp/emb.npy" "$e"; then
      ok "strided_cnn in buckets of H and W at $tag, as executable and embedded: $(tail -n 1 "$tmp/cmp")"
    else bad "strided_cnn in buckets of H and W at $tag" "$(tail -n 2 "$tmp/log") $(tail -n 2 "$tmp/cmp" 2>/dev/null)"; fi
  done
  python3 -c "import numpy as np; np.save('$tmp/w40.npy', np.zeros((1, 3, 48, 40), np.float32))"
  expect_exit 1 "W = 40 refused by the buckets" "$tmp/schw" "$tmp/w40.npy"
  grep -q 'input "x" dim 3 (W) is 40, not a multiple of 16' "$tmp/err" && ok "its message" || bad "its message" "$(cat "$tmp/err")"
  rm -f "$tmp/app"
else
  bad "strided_cnn in buckets of H and W compiles" "$(tail -n 3 "$tmp/report") $(tail -n 3 "$tmp/log")"
fi
if "$B/primc" compile $scd/model.onnx --dim H=16..96%16:16 --dim W=16..96%16:16 -o "$tmp/sc1" --report >"$tmp/report" 2>&1; then
  grep -q 'buckets of H and W: 36 programs' "$tmp/report" && ok "boxes of one value: 36 programs" ||
    bad "boxes of one value in --report" "$(grep buckets "$tmp/report")"
  for tag in 1x3x32x80 1x3x96x48; do
    "$tmp/sc1" "$scd/in_${tag}_0.npy" -o "$tmp/sc1o" >"$tmp/log" 2>&1 && compare "$tmp/sc1o/out0.npy" "$scd/expected_$tag.npy" &&
      ok "boxes of one value at $tag: $(tail -n 1 "$tmp/cmp")" || bad "boxes of one value at $tag" "$(tail -n 2 "$tmp/log")"
  done
else
  bad "strided_cnn in boxes of one value compiles" "$(tail -n 3 "$tmp/report")"
fi
# --autotune with run-time dims: the rows timed at the bounds (each bucket's), which the fit's probes are pinned to;
# each case against ONNX Runtime
for dims in "--dim H=16..96%16 --dim W=16..96%16" "--dim H=16..96%16:32 --dim W=16..96%16:32"; do
  # shellcheck disable=SC2086
  if "$B/primc" compile $scd/model.onnx $dims --autotune --autotune-cache "$tmp/at.txt" -o "$tmp/scat" >"$tmp/log" 2>&1 &&
    grep -q 'autotune: [1-9][0-9]* conv shapes with rows to choose from' "$tmp/log"; then
    for tag in 1x3x16x16 1x3x32x80 1x3x96x96; do
      "$tmp/scat" $scd/in_${tag}_0.npy -o "$tmp/scato" >"$tmp/log" 2>&1 && compare "$tmp/scato/out0.npy" $scd/expected_$tag.npy &&
        ok "--autotune with $dims at $tag: $(tail -n 1 "$tmp/cmp")" || bad "--autotune with $dims at $tag" "$(tail -n 2 "$tmp/log")"
    done
  else bad "--autotune with $dims compiles" "$(tail -n 3 "$tmp/log")"; fi
done
expect_exit 1 "a grid of more than 64 boxes refused" "$B/primc" compile $scd/model.onnx --dim H=16..160%16:16 \
  --dim W=16..160%16:16 -o "$tmp/x"
grep -q 'error: --dim H=16..160%16:16 and --dim W=16..160%16:16 make more than 64 buckets' "$tmp/err" &&
  ok "its message" || bad "its message" "$(cat "$tmp/err")"
expect_exit 1 "buckets as LLVM IR refused" "$B/primc" compile $enc/model.onnx --dim batch=2 --dim seq=1..32:8 --emit llvm \
  -o "$tmp/x.ll"
grep -q 'not LLVM IR or assembly' "$tmp/err" && ok "its message" || bad "its message" "$(cat "$tmp/err")"
# --profile with buckets: one table of every bucket's kernels, each origin led by its bucket; a run at seq 13 times
# bucket 9..16's kernels only, and the answer stays ONNX Runtime's
if "$B/primc" compile $enc/model.onnx --dim batch=2 --dim seq=1..32:8 --profile -o "$tmp/bkprof" >"$tmp/log" 2>&1 &&
  "$tmp/bkprof" $enc/in_2x13_0.npy $enc/in_2x13_1.npy -o "$tmp/bkprof_out" --bench 3 --profile \
    --trace "$tmp/bkprof.json" >"$tmp/prof" 2>&1; then
  rows=$(grep -c '^k[0-9]' "$tmp/prof")
  [ "$rows" -gt 10 ] && [ "$(grep '^k[0-9]' "$tmp/prof" | grep -c ' seq=9\.\.16:')" = "$rows" ] &&
    ok "buckets with --profile: $rows kernels, all of bucket seq=9..16" ||
    bad "buckets with --profile: the kernels of bucket seq=9..16" "$(head -n 5 "$tmp/prof")"
  compare "$tmp/bkprof_out/out0.npy" $enc/expected_2x13.npy && ok "buckets with --profile at 2x13: $(tail -n 1 "$tmp/cmp")" ||
    bad "buckets with --profile at 2x13" "$(tail -n 2 "$tmp/cmp")"
  python3 -c "import json, sys; ev = json.load(open(sys.argv[1]))['traceEvents']
sys.exit(0 if ev and all('seq=9..16:' in str(e.get('args', {}).get('origin', 'seq=9..16:')) for e in ev) else 1)" \
    "$tmp/bkprof.json" && ok "its --trace names bucket seq=9..16" || bad "its --trace" "$(head -c 300 "$tmp/bkprof.json")"
else
  bad "buckets with --profile" "$(tail -n 3 "$tmp/log") $(tail -n 3 "$tmp/prof" 2>/dev/null)"
fi
# --weights external with buckets: one side file holding each distinct constant of the buckets once, mapped by
# the model's NAME_load_weights; the buckets' ends against ONNX Runtime as an executable and a shared library
# through its header (a run before the load: status 2), a damaged file refused
if "$B/primc" compile $enc/model.onnx --dim batch=2 --dim seq=1..32:8 --weights external -o "$tmp/bkw" >"$tmp/log" 2>&1 &&
  [ -s "$tmp/bkw.weights" ]; then
  ok "buckets with --weights external compile, with bkw.weights"
  sizes "buckets, external weights," $enc/model.onnx "$tmp/bkw" 2x1,2x1 2x5,2x5 2x13,2x13 2x25,2x25 2x32,2x32
  exe=$(stat -c %s "$tmp/bkw") side=$(stat -c %s "$tmp/bkw.weights")
  [ -x "$tmp/bk" ] && [ $(($(stat -c %s "$tmp/bk") - exe)) -gt $((side * 9 / 10)) ] &&
    ok "the executable lost the side file's $side bytes" ||
    bad "the executable lost the side file's bytes" "$exe bytes, side file $side, inside $(stat -c %s "$tmp/bk" 2>/dev/null)"
  python3 -c "import sys; b = bytearray(open(sys.argv[1], 'rb').read()); b[200] ^= 1; open(sys.argv[2], 'wb').write(b)" \
    "$tmp/bkw.weights" "$tmp/bad.weights"
  expect_exit 1 "a damaged side file refused" "$tmp/bkw" --random-inputs --weights "$tmp/bad.weights"
  grep -q 'cannot load weights file.*checksum' "$tmp/err" && ok "its message" || bad "its message" "$(cat "$tmp/err")"
else
  bad "buckets with --weights external compile" "$(tail -n 3 "$tmp/log")"
fi
# the CNN's buckets of N=1..8:2 lay their weights out otherwise (N=1's rows differ), with the same constants: the side
# file holds each constant once (0.32 MB; a copy per distinct layout was 0.64)
cnn=models/dynamic/batch_cnn
if "$B/primc" compile $cnn/model.onnx --dim N=1..8:2 --weights external -o "$tmp/bkcw" --report >"$tmp/log" 2>&1; then
  side=$(stat -c %s "$tmp/bkcw.weights")
  grep -q 'N=1..1: .*(weights 0.32 MB, 0.32 MB of them new)' "$tmp/log" &&
    grep -q 'N=7..8: .*(weights 0.32 MB, 0.00 MB of them new)' "$tmp/log" && [ "$side" -lt 400000 ] &&
    ok "the CNN's buckets: each constant once in the side file ($side bytes)" ||
    bad "the CNN's buckets: each constant once" "$side bytes; $(grep -A6 buckets "$tmp/log")"
  for tag in 1x3x64x64 3x3x64x64 8x3x64x64; do
    "$tmp/bkcw" $cnn/in_${tag}_0.npy -o "$tmp/bkcw_out" >"$tmp/log" 2>&1 &&
      compare "$tmp/bkcw_out/out0.npy" $cnn/expected_$tag.npy &&
      ok "the CNN's buckets, external weights, at $tag: $(tail -n 1 "$tmp/cmp")" ||
      bad "the CNN's buckets, external weights, at $tag" "$(tail -n 3 "$tmp/log") $(tail -n 2 "$tmp/cmp" 2>/dev/null)"
  done
else
  bad "the CNN in buckets with --weights external compiles" "$(tail -n 3 "$tmp/log")"
fi
for kind in obj lib; do
  out=$tmp/bkwm.o hdr=bkwm.h link=$tmp/bkwm.o side=$tmp/bkwm.weights
  [ $kind = lib ] && out=$tmp/libbkwm.so hdr=libbkwm.h link="$tmp/libbkwm.so -Wl,-rpath,$tmp" side=$tmp/libbkwm.weights
  # shellcheck disable=SC2086
  "$B/primc" compile $enc/model.onnx --dim batch=2 --dim seq=1..32:8 --weights external --emit $kind --name bkwm \
    -o "$out" >"$tmp/log" 2>&1 &&
    cc -std=c11 -O2 -I"$tmp" -I. -DMODEL_HEADER="\"$hdr\"" -DMODEL=bkwm tests/embed/dynamic.c $link "$B/libprimc_rt.a" \
      ${PRIMC_LDFLAGS:-} -lm -lpthread -o "$tmp/app" >>"$tmp/log" 2>&1 &&
    "$tmp/app" "$tmp/emb.npy" $enc/in_2x13_0.npy $enc/in_2x13_1.npy "$side" >>"$tmp/log" 2>&1 &&
    compare "$tmp/emb.npy" $enc/expected_2x13.npy &&
    ok "buckets with external weights embedded ($kind) at 2x13: $(tail -n 1 "$tmp/cmp")" ||
    bad "buckets with external weights embedded ($kind)" "$(tail -n 3 "$tmp/log") $(tail -n 2 "$tmp/cmp" 2>/dev/null)"
  rm -f "$tmp/app"
done
expect_exit 2 "a bucket of 0 values refused" "$B/primc" compile $enc/model.onnx --dim seq=1..32:0 -o "$tmp/x"
grep -q "bad --dim 'seq=1..32:0'" "$tmp/err" && ok "its message" || bad "its message" "$(cat "$tmp/err")"

# make test-large: BERT-base (12 layers of d 768 with its front: a 30522-token vocabulary, position ids from the
# sequence length, the attention mask; batch 1..8, seq 1..512) and ResNet-50 (batch 1..16), random weights
# (bench/gen_encoder.py, bench/gen_resnet.py), each compiled once and run at 5 sizes against ONNX Runtime
large() { # NAME ONNX DIMS SHAPES...
  local name=$1 model=$2 dims=$3
  shift 3
  local start=$SECONDS
  # shellcheck disable=SC2086
  if ! "$B/primc" compile "$model" $dims -o "$tmp/$name" --report >"$tmp/report" 2>&1; then
    bad "$name compiles once" "$(tail -n 3 "$tmp/report")"
    return
  fi
  echo "  ($name: $(grep 'time:' "$tmp/report" | sed 's/^ *//'); $(grep 'run-time dims' "$tmp/report" | sed 's/^ *//'))"
  sizes "$name" "$model" "$tmp/$name" "$@"
  echo "  ($name: $((SECONDS - start)) s)"
  rm -f "$tmp/$name"
}
if [ "${PRIMC_LARGE:-0}" = 1 ]; then
  python3 bench/gen_encoder.py "$tmp/bert" --dynamic --embed 30522 >/dev/null
  large bert_base "$tmp/bert/model.onnx" "--dim batch=1..8 --dim seq=1..512" 1x1,1x1 1x37,1x37 3x128,3x128 \
    8x512,8x512 2x16,2x16
  python3 bench/gen_resnet.py "$tmp/r50" --depth 50 >/dev/null
  python3 - "$tmp/r50/model.onnx" <<'PY'
import sys, onnx
m = onnx.load(sys.argv[1])
for v in list(m.graph.input) + list(m.graph.output):
    d = v.type.tensor_type.shape.dim[0]
    d.ClearField("dim_value")
    d.dim_param = "N"
onnx.save(m, sys.argv[1])
PY
  large resnet50 "$tmp/r50/model.onnx" "--dim N=1..16" 1x3x224x224 2x3x224x224 7x3x224x224 13x3x224x224 16x3x224x224
  # the image size at run time, in multiples of ResNet's strides' product (32)
  python3 - "$tmp/r50/model.onnx" "$tmp/r50/hw.onnx" <<'PY'
import sys, onnx
m = onnx.load(sys.argv[1])
for k, name in ((0, "N"), (2, "H"), (3, "W")):
    d = m.graph.input[0].type.tensor_type.shape.dim[k]
    d.ClearField("dim_value")
    d.dim_param = name
onnx.save(m, sys.argv[2])
PY
  large resnet50_hw "$tmp/r50/hw.onnx" "--dim N=1 --dim H=64..320%32 --dim W=64..320%32" 1x3x64x64 1x3x224x224 \
    1x3x96x288 1x3x320x160 1x3x320x320
  # in buckets on H and W (25 boxes, whose convs pack some weights otherwise: the pool holds each constant once)
  large resnet50_hw_buckets "$tmp/r50/hw.onnx" "--dim N=1 --dim H=64..320%32:64 --dim W=64..320%32:64" 1x3x64x64 \
    1x3x96x288 1x3x320x160
fi
suite_end dynamic
