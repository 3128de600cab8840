#!/usr/bin/env bash
# tests/suites/cuda.sh: NVRTC compile-check (no GPU needed) of every bundled model (also under --autocast bf16) and
# every ONNX node test that passes on the interpreter; with a CUDA driver present, also runs the bundled models and
# the node tests compiled with --target cuda.
# A model whose kernels NVRTC rejects fails; one holding a prim codegen/cuda.c has no kernel for is unsupported (counted
# as skipped). It fails closed: every model and test sent to primc must come back with a PASS, FAIL or UNSUPPORTED line
# and every primc exit status is checked. The GPU section is skipped (its runs counted as skipped) only when the probe
# executable says there is no driver or no device (its "needs a CUDA GPU: ..." error); any other probe failure fails.
set -u
B=${B:-build}
D=${ONNX_NODE_DIR_GEN:-$B/onnx-node-tests}
ARCH=${PRIMC_GPU_ARCH:-sm_90}
EXPECTED=tests/conformance_expected.txt
XFAIL=tests/conformance_compiled_xfail.txt
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
start=$SECONDS
pass=0
fail=0
skip=0
bad() { echo "FAIL $*"; fail=$((fail + 1)); }

# the node tests that pass on the interpreter as they are (not those needing specialized shape inputs); the interpreter
# run must pass every expected test, or the list would silently shrink
: >"$tmp/node"
if [ -f "$D/.complete" ]; then
  "$B/primc" conformance --dir "$D" >"$tmp/conf" 2>&1
  rc=$?
  [ "$rc" -eq 0 ] || bad "interpreter conformance run exited $rc: $(tail -n 1 "$tmp/conf")"
  grep -vE '^\s*(#|$)' "$EXPECTED" | sort -u >"$tmp/expected"
  sed -nE 's/^PASS ([^ ]+)( .*)?$/\1/p' "$tmp/conf" | sort -u >"$tmp/conf_passed"
  missing=$(comm -23 "$tmp/expected" "$tmp/conf_passed" | wc -l)
  [ "$missing" -eq 0 ] || bad "interpreter conformance: $missing expected tests did not pass, so the node list is short"
  sed -n 's/^PASS \([^ ]*\)$/\1/p' "$tmp/conf" | sed "s|.*|$D/&/model.onnx|" >"$tmp/node"
  echo "node tests: $(wc -l <"$tmp/node") pass on the interpreter," \
    "$(grep -c '^PASS .*(specialized' "$tmp/conf") more with specialized inputs (not checked here)"
else
  bad "no $D/.complete: run tests/suites/conformance.sh first, it writes the node tests"
fi

ls models/*/model.onnx | cat - "$tmp/node" >"$tmp/all"
n_models=$(ls models/*/model.onnx | wc -l)
n_nodes=$(grep -cvE '^\s*(#|$)' "$EXPECTED")

# without the NVRTC library nothing below can run: all of it counts as skipped (NVRTC present but failing fails)
"$B/primc" compile --target cuda --nvrtc-check --gpu-arch "$ARCH" models/mlp/model.onnx >"$tmp/probe" 2>&1
rc=$?
if [ "$rc" -ne 0 ] && grep -q 'NVRTC not found' "$tmp/probe"; then
  cat "$tmp/probe"
  skip=$(($(wc -l <"$tmp/all") + 2 * n_models + n_nodes))
  echo "SKIP nvrtc-check and the GPU runs: NVRTC not found"
  echo "cuda-nvrtc: 0 passed, $fail failed, $skip skipped (NVRTC not found)"
  [ "$fail" -eq 0 ]
  exit
fi

# one NVRTC process per core, each on every n-th model
cores=$(nproc)
for k in $(seq 0 $((cores - 1))); do
  # shellcheck disable=SC2046
  ("$B/primc" compile --target cuda --nvrtc-check --gpu-arch "$ARCH" $(awk -v k="$k" -v n="$cores" 'NR % n == k' "$tmp/all") \
    >"$tmp/check$k" 2>&1
   echo $? >"$tmp/rc$k") &
done
wait
cat "$tmp"/check[0-9]* >"$tmp/check"
grep -v '^PASS ' "$tmp/check" | grep -v '^nvrtc-check:' | grep -v '^UNSUPPORTED '
npass=$(grep -c '^PASS ' "$tmp/check")
nfail=$(grep -c '^FAIL ' "$tmp/check")
unsup=$(grep -c '^UNSUPPORTED ' "$tmp/check")
# every model sent must have its line; an exit status must say the same as the lines
sed -nE 's/^(PASS|FAIL|UNSUPPORTED) ([^:]+)(:.*)?$/\2/p' "$tmp/check" | sort -u >"$tmp/seen"
sort -u "$tmp/all" >"$tmp/sent"
comm -23 "$tmp/sent" "$tmp/seen" >"$tmp/unseen"
while read -r m; do bad "nvrtc-check $m: no result (primc crashed or stopped)"; done <"$tmp/unseen"
for k in $(seq 0 $((cores - 1))); do
  r=$(cat "$tmp/rc$k")
  # nvrtc-check exits 1 when a model failed: only then may it be non-zero
  if [ "$r" -ne 0 ] && { [ "$nfail" -eq 0 ] || [ "$r" -ne 1 ]; }; then bad "nvrtc-check process $k exited $r"; fi
done
if [ "$unsup" -gt 0 ]; then
  echo "unsupported on CUDA ($unsup), by reason:"
  sed -n 's/^UNSUPPORTED [^:]*: //p' "$tmp/check" | sed -E 's/^[^:]*"[^"]*": //' | sort | uniq -c | sort -rn
fi
echo "nvrtc-check: $npass passed, $nfail failed, $unsup unsupported of $(wc -l <"$tmp/all") sent ($ARCH, $cores processes)"
echo "nvrtc time: $((SECONDS - start)) s"
pass=$((pass + npass))
fail=$((fail + nfail))
skip=$((skip + unsup))

# the bundled models again under --autocast bf16 (bf16 tensor-core rows) for $ARCH and for sm_75 (SIMT rows on
# operands rounded to bf16): every one must compile
for arch in "$ARCH" sm_75; do
  # shellcheck disable=SC2046
  "$B/primc" compile --target cuda --nvrtc-check --gpu-arch "$arch" --autocast bf16 $(ls models/*/model.onnx) >"$tmp/bf16" 2>&1
  rc=$?
  nb=$(grep -c '^PASS ' "$tmp/bf16")
  if [ "$rc" -eq 0 ] && [ "$nb" -eq "$n_models" ]; then
    pass=$((pass + nb))
    echo "nvrtc-check --autocast bf16 ($arch): $nb of $n_models bundled models compile"
  else
    bad "nvrtc-check --autocast bf16 ($arch) exited $rc, $nb of $n_models passed: $(grep -v '^PASS ' "$tmp/bf16" | head -n 3)"
  fi
done

# a conv net's gradient graph: its weight gradients keep the stored columns for CUDA (the host's primc_k_dot_cols
# call, which reads them in place, has no CUDA kernel), so it compiles
"$B/primc" compile --target cuda --nvrtc-check --gpu-arch "$ARCH" --grad models/resnet_tiny/model.onnx >"$tmp/grad" 2>&1
rc=$?
if [ "$rc" -eq 0 ] && grep -q '^PASS ' "$tmp/grad"; then
  pass=$((pass + 1))
  echo "nvrtc-check --grad: resnet_tiny compiles"
else
  bad "nvrtc-check --grad resnet_tiny exited $rc: $(grep -v '^PASS ' "$tmp/grad" | head -n 3)"
fi

# on a GPU: every bundled model compiled for CUDA matches its ONNX Runtime reference, plain and as a CUDA graph,
# and every expected node test passes compiled for CUDA (known exceptions: "cuda" rows of the xfail list)
gpu=0
if ! "$B/primc" compile models/mlp/model.onnx --target cuda --gpu-arch "$ARCH" -o "$tmp/probe.exe" >"$tmp/probe.log" 2>&1; then
  bad "compiling the GPU probe (mlp, --target cuda): $(tail -n 2 "$tmp/probe.log")"
elif "$tmp/probe.exe" --random-inputs >"$tmp/probe.log" 2>&1; then
  gpu=1
else
  rc=$?
  # the one condition that skips: the driver's own answer that there is no driver or no device
  if [ "$rc" -eq 1 ] &&
    grep -qE 'needs a CUDA GPU: (libcuda\.so\.1 not found|cuInit: .*no usable CUDA device)' "$tmp/probe.log"; then
    skip=$((skip + 2 * n_models + n_nodes))
    echo "SKIP cuda-run: no usable GPU ($(tail -n 1 "$tmp/probe.log")): $((2 * n_models)) model runs and $n_nodes node tests skipped"
  else
    bad "GPU probe exited $rc without saying there is no GPU: $(tail -n 3 "$tmp/probe.log")"
  fi
fi
if [ "$gpu" = 1 ]; then
  run_pass=0 run_fail=0
  for d in models/*/; do
    [ -f "$d/model.onnx" ] || continue
    name=$(basename "$d")
    for graphs in "--no-cuda-graphs" ""; do # a stream, then the default: a CUDA graph
      log=$tmp/run-$name.log
      rm -rf "$tmp/out-$name"
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
  pass=$((pass + run_pass))
  fail=$((fail + run_fail))
  # every expected node test compiled for CUDA and run on the GPU, in one shard per core
  start_nodes=$SECONDS
  shards=$(nproc)
  i=0
  for t in $(grep -vE '^\s*(#|$)' "$EXPECTED"); do
    mkdir -p "$tmp/shard$((i % shards))"
    ln -s "$(cd "$D" && pwd)/$t" "$tmp/shard$((i % shards))/$t"
    i=$((i + 1))
  done
  for s in "$tmp"/shard*/; do
    ("$B/primc" conformance --dir "$s" --compiled --target cuda --gpu-arch "$ARCH" >"${s%/}.log" 2>&1
     echo $? >"${s%/}.rc") &
  done
  wait
  for r in "$tmp"/shard*.rc; do [ "$(cat "$r")" -eq 0 ] || bad "GPU conformance shard ${r%.rc} exited $(cat "$r")"; done
  node_pass=0
  for t in $(grep -vE '^\s*(#|$)' "$EXPECTED"); do
    why=""
    grep -qhE "^PASS $t( |$)" "$tmp"/shard*.log ||
      why=$(grep -hE "^(FAIL|UNSUPPORTED) $t:" "$tmp"/shard*.log | head -n 1 | grep . || echo "$t: did not run")
    reason=$(grep -E "^$t +cuda " "$XFAIL" | head -n 1 | sed -E 's/^[^ ]+ +[^ ]+ +//')
    if [ -z "$why" ]; then
      [ -n "$reason" ] && echo "XPASS cuda-node $t: passes now, remove it from $XFAIL"
      node_pass=$((node_pass + 1))
    elif [ -n "$reason" ] && [ "${why#*: did not run}" = "$why" ]; then
      echo "XFAIL cuda-node $t: $reason"
      skip=$((skip + 1))
    else
      bad "cuda-node $why"
    fi
  done
  pass=$((pass + node_pass))
  echo "cuda-node: $node_pass of $i expected node tests pass on the GPU ($((SECONDS - start_nodes)) s, $shards shards)"
fi

echo "cuda-nvrtc: $pass passed, $fail failed, $skip skipped ($((SECONDS - start)) s; skipped: unsupported on CUDA, known failures, or no GPU)"
[ "$fail" -eq 0 ]
