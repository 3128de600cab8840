#!/usr/bin/env bash
# tests/suites/attention.sh: the fused attention call on a BERT-shaped encoder at seq 512 (bench/gen_encoder.py,
# 2 layers, width 64, 2 heads, Hugging Face's embedding front with its padding mask): one primc_k_attention call
# per layer, a workspace smaller than one layer's [2, 512, 512] scores (2 MiB; --unfused and -O0 store them), and
# the compiled model against ONNX Runtime with a quarter of the keys padded.
set -u
B=${B:-build}
P=$(realpath -m "$B/primc")
. tests/suite_lib.sh

m="$tmp/enc"
python3 bench/gen_encoder.py "$m" --seq 512 --layers 2 --d 64 --heads 2 --ffn 128 --embed 100 >"$tmp/gen.log" 2>&1 ||
  bad "gen_encoder.py" "$(tail -n 3 "$tmp/gen.log")"
scores=$((2 * 512 * 512 * 4))
ws() { "$P" dump "$m/model.onnx" --memory "$@" 2>"$tmp/err" | sed -n 's/^workspace \([0-9]*\) bytes$/\1/p'; }
n=$("$P" dump "$m/model.onnx" --kernels 2>"$tmp/err" | grep -c 'call primc_k_attention')
[ "$n" = 2 ] && ok "one attention call per layer" || bad "attention calls" "$n, wanted 2: $(head -c 300 "$tmp/err")"
w=$(ws)
[ -n "$w" ] && [ "$w" -lt "$scores" ] && ok "fused workspace $w bytes holds no 512 x 512 scores" ||
  bad "fused workspace" "'$w' bytes, wanted under $scores"
for f in --unfused -O0; do
  w=$(ws "$f")
  [ -n "$w" ] && [ "$w" -ge "$scores" ] && ok "$f stores the scores ($w bytes)" || bad "$f workspace" "'$w' bytes"
done

python3 - "$m" >"$tmp/ref.log" 2>&1 <<'PY' || bad "ONNX Runtime reference" "$(tail -n 3 "$tmp/ref.log")"
import sys, numpy as np, onnxruntime as ort
d = sys.argv[1]
ids = np.load(f"{d}/input.npy")
mask = np.ones_like(ids)
mask[:, 384:] = 0
np.save(f"{d}/mask.npy", mask)
s = ort.InferenceSession(f"{d}/model.onnx", providers=["CPUExecutionProvider"])
np.save(f"{d}/expected.npy", s.run(None, {"input_ids": ids, "attention_mask": mask})[0])
PY
if timeout 300 "$P" compile "$m/model.onnx" -o "$tmp/enc.exe" >"$tmp/err" 2>&1 &&
  "$tmp/enc.exe" "$m/input.npy" "$m/mask.npy" -o "$tmp/out" >/dev/null 2>>"$tmp/err" &&
  python3 tests/compare_npy.py "$tmp/out/out0.npy" "$m/expected.npy" --rtol 1e-4 --atol 1e-4 >>"$tmp/err" 2>&1; then
  ok "fused encoder with a padding mask matches ONNX Runtime"
else bad "fused encoder against ONNX Runtime" "$(tail -n 3 "$tmp/err")"; fi

suite_end attention
