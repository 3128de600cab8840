#!/usr/bin/env bash
# tools/gpu_check.sh: every GPU check and benchmark in one call, for a lent GPU machine (device time is scarce).
# Here: tools/gpu_bundle.sh (the built binaries, their libraries, the node tests). There, from the checkout's root:
#   bash tools/gpu_check.sh OUTDIR [SECONDS] [STAGES]
# runs STAGES in order, each cut to what is left of SECONDS (default 540); words joined by '+' run at once (the
# correctness stages and the export share the 16 cores; timed stages run alone). Default STAGES:
#   "unit+nodes+export+dyn gemm tf32 rows prof bf16 fp32 b32 compile"
#   unit     build/test_primc cuda_gpu and cuda_pkg (every prim, every GEMM tile row forced: SIMT, TF32, bf16, f16,
#            on the GPU against the interpreter; a packaged executable)
#   nodes    the conv / gemm / matmul node tests compiled for CUDA and run on the GPU
#   dyn      tests/suites/dynamic.sh: models/dynamic compiled once for CUDA with their ranges, run at every case
#            against ONNX Runtime (stream and CUDA graph)
#   export   the zoo models (ZOO_MODELS) at batch 1 and BATCH32_MODELS at batch 32, once, for the stages below
#   gemm     bench/gpu_gemm.py: primc's f32, TF32 and bf16 GEMM against cuBLAS at 4096^3 and 1024^3
#   tf32, bf16, fp32
#            bench/gpu.py on ZOO_MODELS at batch 1 against PyTorch eager (no torch.compile: its compiles take the
#            minutes), TF32 on both sides (and primc's attention kernel before, PRIMC_CUDA_ATTN=dims), bf16
#            autocast on both, fp32 with the kernels before the tiled GEMMs too
#   rows     bench/gpu_rows.py: each TF32 and f32 tile row (the candidates too) forced on ROWS_SHAPES' MatMuls
#            beside primc's pick
#   prof     bench/gpu_prof.py (Nsight Compute): each kernel's GPU time in one TF32 run of PROF_MODELS
#   b32      bench/gpu.py --tf32 at batch 32 on BATCH32_MODELS, against eager
#   compile  bench/gpu.py --tf32 with torch.compile on COMPILE_MODELS, last: it stops where the time ends
# Logs go to OUTDIR (summary.txt first); a stage that fails does not stop the next. A device command can bring
# back few files: pack OUTDIR into one archive there.
set -u
OUT=${1:?usage: tools/gpu_check.sh OUTDIR [SECONDS] [STAGES]}
BUDGET=${2:-540}
STAGES=${3:-unit+nodes+export+dyn gemm tf32 rows prof bf16 fp32 b32 compile}
ZOO_MODELS=${ZOO_MODELS:-bert_base gpt2_block resnet50 vit_tiny resnet18}
BATCH32_MODELS=${BATCH32_MODELS:-bert_base resnet50}
COMPILE_MODELS=${COMPILE_MODELS:-gpt2_block bert_base resnet50 vit_tiny}
PROF_MODELS=${PROF_MODELS:-bert_base resnet50}
ROWS_SHAPES=${ROWS_SHAPES:-128x768x3072 128x3072x768 128x768x768 4096x768x3072 4096x4096x4096}
RUNS=${ZOO_RUNS:-30}
WORK=${WORK:-/tmp/primc-zoo}
mkdir -p "$OUT" "$WORK"
# shellcheck disable=SC1091
source .gpu-bundle/env.sh
export PYTHONUNBUFFERED=1 OUT
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv >"$OUT/gpu.txt" 2>&1
start=$SECONDS
status=0
left() { echo $((BUDGET - (SECONDS - start))); }
zoo() { # name flags...: bench/gpu.py over exported models
  python3 bench/gpu.py build/primc "$RUNS" "$OUT/$1.md" --work "$WORK" "${@:2}"
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
run_stage() { # name: one stage, limited to the time left
  local name=$1 t0=$SECONDS limit rc
  limit=$(left)
  if [ "$limit" -lt 20 ]; then
    echo "== $name: not run, ${limit} s left" >>"$OUT/summary.txt"
    return 1
  fi
  # shellcheck disable=SC2086
  case $name in
  unit) timeout "$limit" bash -c 'build/test_primc cuda_gpu && build/test_primc cuda_pkg' ;;
  nodes) timeout "$limit" bash -c nodes ;;
  dyn) timeout "$limit" bash tests/suites/dynamic.sh ;;
  export) timeout "$limit" bash -c "python3 bench/gpu.py build/primc 1 - --work $WORK --export-only $ZOO_MODELS &&
            python3 bench/gpu.py build/primc 1 - --work $WORK --export-only --batch 32 $BATCH32_MODELS" ;;
  gemm) timeout "$limit" python3 bench/gpu_gemm.py build/primc 4096 1024 ;;
  tf32) timeout "$limit" bash -c "zoo zoo_tf32 --tf32 --no-compile --also PRIMC_CUDA_ATTN=dims $ZOO_MODELS" ;;
  bf16) timeout "$limit" bash -c "zoo zoo_bf16 --bf16 --no-compile $ZOO_MODELS" ;;
  fp32) timeout "$limit" bash -c "zoo zoo_fp32 --direct --no-compile $ZOO_MODELS" ;;
  rows) timeout "$limit" bash -c "python3 bench/gpu_rows.py build/primc high $ROWS_SHAPES &&
            python3 bench/gpu_rows.py build/primc highest $ROWS_SHAPES" ;;
  prof) timeout "$limit" bash -c "for m in $PROF_MODELS; do python3 bench/gpu_prof.py build/primc \$WORK/\${m}_b1/model.onnx \
            \$WORK/\${m}_b1/input.npy 30 -- --matmul-precision high; done" ;;
  b32) timeout "$limit" bash -c "zoo zoo_b32 --tf32 --no-compile --batch 32 $BATCH32_MODELS" ;;
  compile) timeout "$limit" bash -c "zoo zoo_compile --tf32 $COMPILE_MODELS" ;;
  *) echo "unknown stage" ; false ;;
  esac >"$OUT/$name.log" 2>&1
  rc=$?
  # one append per stage: stages that run at once do not interleave their lines
  { echo "== $name: exit $rc in $((SECONDS - t0)) s"; tail -n 12 "$OUT/$name.log"; } >"$OUT/$name.sum"
  cat "$OUT/$name.sum" >>"$OUT/summary.txt" && rm -f "$OUT/$name.sum"
  return $rc
}
export -f nodes zoo
export WORK RUNS
for group in $STAGES; do
  pids=()
  for s in ${group//+/ }; do
    run_stage "$s" &
    pids+=($!)
  done
  for p in "${pids[@]}"; do wait "$p" || status=1; done
done
cat "$OUT/summary.txt"
exit $status
