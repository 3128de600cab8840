#!/usr/bin/env bash
# tools/gpu_check.sh: every GPU check and benchmark in one call, for a lent GPU machine (device time is scarce).
# Here: tools/gpu_bundle.sh (the built binaries, their libraries, the node tests). There, from the checkout's root:
#   bash tools/gpu_check.sh OUTDIR [STAGES]   STAGES (default "unit nodes gemm zoo"): any of
#   unit   build/test_primc cuda_gpu and cuda_pkg (every prim, every GEMM tile row forced: SIMT, TF32, bf16, f16,
#          on the GPU against the interpreter; a packaged executable)
#   nodes  the conv / gemm / matmul node tests compiled for CUDA and run on the GPU
#   gemm   bench/gpu_gemm.py: primc's f32, TF32 and bf16 GEMM against cuBLAS at 4096^3 and 1024^3
#   zoo    bench/gpu.py on the heavy models, fp32 (with the kernels before the tiled GEMMs, --direct), TF32 and
#          --autocast bf16 (against torch.autocast bf16), batch 1 (ZOO_PRECISIONS, default "fp32 tf32 bf16",
#          ZOO_MODELS, ZOO_RUNS, ZOO_FLAGS such as --no-compile or --batch 32, and LIMIT_ZOO override)
# Each stage has its own time limit and log in OUTDIR; a stage that fails does not stop the next. All stages take
# longer than one 10-minute command: run "unit nodes gemm" and "zoo" as two calls.
set -u
OUT=${1:?usage: tools/gpu_check.sh OUTDIR [STAGES]}
STAGES=${2:-unit nodes gemm zoo}
mkdir -p "$OUT"
# shellcheck disable=SC1091
source .gpu-bundle/env.sh
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv >"$OUT/gpu.txt" 2>&1
status=0
stage() { # name limit command...
  local name=$1 limit=$2 t0=$SECONDS
  shift 2
  timeout "$limit" "$@" >"$OUT/$name.log" 2>&1
  local rc=$?
  echo "== $name: exit $rc in $((SECONDS - t0)) s" | tee -a "$OUT/summary.txt"
  tail -n 4 "$OUT/$name.log" | tee -a "$OUT/summary.txt"
  [ "$rc" -eq 0 ] || status=1
}
nodes() {
  local pids=() f
  for f in test_conv test_gemm test_matmul; do
    build/primc conformance --dir build/onnx-node-tests --compiled --target cuda --filter "$f" >"$OUT/nodes_$f.txt" 2>&1 &
    pids+=($!)
  done
  for p in "${pids[@]}"; do wait "$p"; done
  grep -h '^FAIL' "$OUT"/nodes_*.txt | head -n 20
  local pass fail unsup
  pass=$(cat "$OUT"/nodes_*.txt | grep -c '^PASS')
  fail=$(cat "$OUT"/nodes_*.txt | grep -c '^FAIL')
  unsup=$(cat "$OUT"/nodes_*.txt | grep -c '^UNSUPPORTED')
  echo "nodes: $pass passed, $fail failed, $unsup unsupported"
  [ "$pass" -gt 0 ] && [ "$fail" -eq 0 ]
}
export OUT
export -f nodes
for s in $STAGES; do
  case $s in
  unit) stage unit 180 bash -c 'build/test_primc cuda_gpu && build/test_primc cuda_pkg' ;;
  nodes) stage nodes 60 bash -c nodes ;;
  gemm) stage gemm 90 python3 bench/gpu_gemm.py build/primc 4096 1024 ;;
  zoo)
    # shellcheck disable=SC2086
    for p in ${ZOO_PRECISIONS:-fp32 tf32 bf16}; do
      stage "zoo_$p" "${LIMIT_ZOO:-180}" python3 bench/gpu.py build/primc "${ZOO_RUNS:-30}" "$OUT/zoo_$p.md" \
        $([ $p = fp32 ] && echo --direct || echo "--$p") ${ZOO_FLAGS:-} ${ZOO_MODELS:-resnet50 bert_base gpt2_block vit_tiny resnet18}
    done
    ;;
  *) echo "unknown stage $s" | tee -a "$OUT/summary.txt"; status=1 ;;
  esac
done
exit $status
