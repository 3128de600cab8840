#!/usr/bin/env bash
# tests/suites/cuda.sh: NVRTC compile-check (no GPU needed) of every bundled model and every ONNX node test that passes
# on the interpreter; with a CUDA driver present, also runs the bundled models and the node tests compiled with --target cuda.
# A model whose kernels NVRTC rejects fails; one holding a prim codegen/cuda.c has no kernel for is unsupported.
set -u
B=${B:-build}
D=${ONNX_NODE_DIR_GEN:-$B/onnx-node-tests}
ARCH=${PRIMC_GPU_ARCH:-sm_90}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
start=$SECONDS

if ! "$B/primc" compile --target cuda --nvrtc-check --gpu-arch "$ARCH" models/mlp/model.onnx >"$tmp/probe" 2>&1 &&
  grep -q 'NVRTC not found' "$tmp/probe"; then
  cat "$tmp/probe"
  echo "cuda-nvrtc: 0 passed, 0 failed (NVRTC not found: skipped)"
  exit 0
fi

# the node tests that pass on the interpreter as they are (not those needing specialized shape inputs)
: >"$tmp/node"
if [ -f "$D/.complete" ]; then
  "$B/primc" conformance --dir "$D" >"$tmp/conf" 2>&1
  sed -n 's/^PASS \([^ ]*\)$/\1/p' "$tmp/conf" | sed "s|.*|$D/&/model.onnx|" >"$tmp/node"
  echo "node tests: $(wc -l <"$tmp/node") pass on the interpreter," \
    "$(grep -c '^PASS .*(specialized' "$tmp/conf") more with specialized inputs (not checked here)"
else
  echo "no $D/.complete: run tests/suites/conformance.sh first for the node tests; checking the bundled models only"
fi

# one NVRTC process per core, each on every n-th model
ls models/*/model.onnx | cat - "$tmp/node" >"$tmp/all"
cores=$(nproc)
for k in $(seq 0 $((cores - 1))); do
  # shellcheck disable=SC2046
  "$B/primc" compile --target cuda --nvrtc-check --gpu-arch "$ARCH" $(awk -v k="$k" -v n="$cores" 'NR % n == k' "$tmp/all") \
    >"$tmp/check$k" 2>&1 &
done
wait
cat "$tmp"/check[0-9]* >"$tmp/check"
grep -v '^PASS ' "$tmp/check" | grep -v '^nvrtc-check:' | grep -v '^UNSUPPORTED '
pass=$(grep -c '^PASS ' "$tmp/check")
fail=$(grep -c '^FAIL ' "$tmp/check")
unsup=$(grep -c '^UNSUPPORTED ' "$tmp/check")
if [ "$unsup" -gt 0 ]; then
  echo "unsupported on CUDA ($unsup), by reason:"
  sed -n 's/^UNSUPPORTED [^:]*: //p' "$tmp/check" | sed -E 's/^[^:]*"[^"]*": //' | sort | uniq -c | sort -rn
fi
echo "nvrtc-check: $pass passed, $fail failed, $unsup unsupported of $((pass + fail + unsup)) ($ARCH, $cores processes)"
echo "nvrtc time: $((SECONDS - start)) s"

# on a GPU: every bundled model compiled for CUDA matches its ONNX Runtime reference, plain and as a CUDA graph,
# and every expected node test passes compiled for CUDA (known exceptions: "cuda" rows of the xfail list)
run_fail=0
run_pass=0
node_pass=0
if "$B/primc" compile models/mlp/model.onnx --target cuda --gpu-arch "$ARCH" -o "$tmp/probe.exe" >/dev/null 2>&1 &&
  "$tmp/probe.exe" --random-inputs >"$tmp/probe.log" 2>&1; then
  for d in models/*/; do
    [ -f "$d/model.onnx" ] || continue
    name=$(basename "$d")
    for graphs in "" "--cuda-graphs"; do
      log=$tmp/run-$name.log
      if "$B/primc" compile "$d/model.onnx" --target cuda --gpu-arch "$ARCH" -o "$tmp/$name.exe" >"$log" 2>&1 &&
        "$tmp/$name.exe" "$d/input.npy" -o "$tmp/out-$name" --bench 20 $graphs >>"$log" 2>&1 &&
        python3 tests/compare_npy.py "$tmp/out-$name/out0.npy" "$d/expected.npy" --rtol 1e-4 --atol 1e-5 >>"$log" 2>&1; then
        echo "PASS cuda-run $name $graphs: $(grep 'runs' "$log" | tail -n 1)"
        run_pass=$((run_pass + 1))
      else
        echo "FAIL cuda-run $name $graphs: $(tail -n 3 "$log")"
        run_fail=$((run_fail + 1))
      fi
    done
  done
  echo "cuda-run: $run_pass passed, $run_fail failed"
  # every expected node test compiled for CUDA and run on the GPU, in one shard per core
  if [ -f "$D/.complete" ]; then
    start_nodes=$SECONDS
    shards=$(nproc)
    i=0
    for t in $(grep -vE '^\s*(#|$)' tests/conformance_expected.txt); do
      mkdir -p "$tmp/shard$((i % shards))"
      ln -s "$(cd "$D" && pwd)/$t" "$tmp/shard$((i % shards))/$t"
      i=$((i + 1))
    done
    for s in "$tmp"/shard*/; do
      "$B/primc" conformance --dir "$s" --compiled --target cuda --gpu-arch "$ARCH" >"${s%/}.log" 2>&1 &
    done
    wait
    for t in $(grep -vE '^\s*(#|$)' tests/conformance_expected.txt); do
      why=""
      grep -qhE "^PASS $t( |$)" "$tmp"/shard*.log ||
        why=$(grep -hE "^(FAIL|UNSUPPORTED) $t:" "$tmp"/shard*.log | head -n 1 | grep . || echo "$t: did not run")
      reason=$(grep -E "^$t +cuda " tests/conformance_compiled_xfail.txt | head -n 1 | sed -E 's/^[^ ]+ +[^ ]+ +//')
      if [ -z "$why" ]; then
        [ -n "$reason" ] && echo "XPASS cuda-node $t: passes now, remove it from tests/conformance_compiled_xfail.txt"
        node_pass=$((node_pass + 1))
      elif [ -n "$reason" ]; then
        echo "XFAIL cuda-node $t: $reason"
      else
        echo "FAIL cuda-node $why"
        run_fail=$((run_fail + 1))
      fi
    done
    echo "cuda-node: $node_pass of $i expected node tests pass on the GPU ($((SECONDS - start_nodes)) s, $shards shards)"
  fi
else
  echo "cuda-run: skipped, no usable GPU ($(tail -n 1 "$tmp/probe.log" 2>/dev/null))"
fi

echo "cuda-nvrtc: $((pass + run_pass + node_pass)) passed, $((fail + run_fail)) failed, $unsup unsupported ($((SECONDS - start)) s)"
[ "$fail" -eq 0 ] && [ "$run_fail" -eq 0 ]
