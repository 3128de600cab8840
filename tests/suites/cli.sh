#!/usr/bin/env bash
# tests/suites/cli.sh: the primc command line as a user meets it: help, version, reports, and bad input giving
# one error line and exit code 1 (usage errors: 2).
set -u
B=${B:-build}
P=$B/primc
. tests/suite_lib.sh


expect_exit 0 "version" "$P" version
grep -q '^primc ' "$tmp/out" || bad "version text" "$(cat "$tmp/out")"
for c in run dump compile conformance bench inputs check; do
  expect_exit 0 "$c --help" "$P" "$c" --help
  grep -q "usage: primc $c" "$tmp/out" || bad "$c --help text" "$(head -n 1 "$tmp/out")"
done
expect_exit 2 "unknown command is a usage error" "$P" frobnicate

# bad models: one line on stderr naming the problem, exit 1, nothing on stdout
for m in truncated unknown_op shape_mismatch external_dotdot absurd_dims deep_sequence_type deep_if; do
  expect_exit 1 "run $m.onnx" "$P" run "tests/data/onnx_bad/$m.onnx" --random-inputs -o "$tmp/o"
  [ "$(wc -l <"$tmp/err")" -eq 1 ] && grep -q '^primc: error: ' "$tmp/err" || bad "$m error line" "$(cat "$tmp/err")"
  expect_exit 1 "compile $m.onnx" "$P" compile "tests/data/onnx_bad/$m.onnx" -o "$tmp/x"
done

# compile --report: the memory plan with its peak, the same as dump --memory's
expect_exit 0 "compile --report" "$P" compile models/resnet_tiny/model.onnx -O2 -o "$tmp/rt" --report
peak_report=$(grep '^peak ' "$tmp/out")
"$P" dump models/resnet_tiny/model.onnx -O2 --memory >"$tmp/mem" 2>&1
peak_dump=$(grep '^peak ' "$tmp/mem")
if [ -n "$peak_report" ] && [ "$peak_report" = "$peak_dump" ]; then ok "report peak = dump --memory peak"
else bad "report peak" "report '$peak_report' dump '$peak_dump'"; fi
grep -q '^kernel k0 ' "$tmp/out" && ok "report lists kernels" || bad "report lists kernels" "no kernel k0"

# dump --kernels names every conv call's row; PRIMC_CONV_ROW forces one where it fits, and the forced
# build still matches the reference
"$P" dump models/resnet_tiny/model.onnx -O2 --kernels >"$tmp/k" 2>&1
calls=$(grep -c 'call primc_k_conv(' "$tmp/k"); rows=$(grep -c 'call primc_k_conv(.*conv row [a-z0-9_]' "$tmp/k")
[ "$calls" -gt 0 ] && [ "$calls" = "$rows" ] && ok "dump --kernels: a row for each of $calls convs" ||
  bad "dump --kernels rows" "$rows rows for $calls conv calls"
PRIMC_CONV_ROW=im2col_implicit "$P" dump models/resnet_tiny/model.onnx -O2 --kernels >"$tmp/k" 2>&1
[ "$(grep -c 'conv row im2col_implicit' "$tmp/k")" = "$calls" ] && ok "PRIMC_CONV_ROW forces the row" ||
  bad "PRIMC_CONV_ROW" "$(grep -o 'conv row [a-z0-9_]*' "$tmp/k" | sort | uniq -c | tr '\n' ' ')"
mkdir -p "$tmp/forced"
if PRIMC_CONV_ROW=lanes_loop "$P" compile models/resnet_tiny/model.onnx -O2 -o "$tmp/forced/m" >/dev/null 2>&1 &&
  "$tmp/forced/m" models/resnet_tiny/input.npy -o "$tmp/forced" >/dev/null 2>&1 &&
  python3 tests/compare_npy.py "$tmp/forced/out0.npy" models/resnet_tiny/expected.npy --rtol 1e-4 --atol 1e-5 >/dev/null 2>&1
then ok "PRIMC_CONV_ROW=lanes_loop build matches the reference"; else bad "forced lanes_loop build" "differs or failed"; fi

# --autotune: the conv rows timed here and cached; the tuned build matches the reference (ONNX Runtime's
# numbers in expected.npy), a second compile reads every choice from the cache, a corrupt cache is
# ignored with a warning and rewritten, and dump --kernels --autotune marks the rows it took
mkdir -p "$tmp/tuned"
expect_exit 0 "compile --autotune" "$P" compile models/resnet_tiny/model.onnx -O2 -o "$tmp/tuned/m" --autotune \
  --autotune-cache "$tmp/tuned/cache.txt"
grep -q '^primc: autotune: [1-9][0-9]* conv shapes .*, \([1-9][0-9]*\) timed, 0 from the cache' "$tmp/err" &&
  [ -s "$tmp/tuned/cache.txt" ] && ok "autotune times the convs and writes the cache" ||
  bad "autotune first compile" "$(cat "$tmp/err")"
if "$tmp/tuned/m" models/resnet_tiny/input.npy -o "$tmp/tuned" >/dev/null 2>&1 &&
  python3 tests/compare_npy.py "$tmp/tuned/out0.npy" models/resnet_tiny/expected.npy --rtol 1e-4 --atol 1e-5 >/dev/null 2>&1
then ok "the autotuned build matches the reference"; else bad "autotuned build" "differs or failed"; fi
PRIMC_AUTOTUNE_CACHE="$tmp/tuned/cache.txt" expect_exit 0 "compile --autotune, warm cache" \
  "$P" compile models/resnet_tiny/model.onnx -O2 -o "$tmp/tuned/m2" --autotune
grep -q ', 0 timed, [1-9][0-9]* from the cache' "$tmp/err" && ok "the second compile reads the cache" ||
  bad "autotune second compile" "$(cat "$tmp/err")"
"$P" dump models/resnet_tiny/model.onnx -O2 --kernels --autotune --autotune-cache "$tmp/tuned/cache.txt" >"$tmp/k" 2>&1
[ "$(grep -c 'conv row [a-z0-9_]* (tuned' "$tmp/k")" -gt 0 ] && ok "dump --kernels --autotune marks tuned rows" ||
  bad "dump --autotune" "$(grep -m3 'conv row' "$tmp/k")"
printf 'garbage\n' >"$tmp/tuned/cache.txt"
expect_exit 0 "compile --autotune, corrupt cache" "$P" compile models/resnet_tiny/model.onnx -O2 -o "$tmp/tuned/m3" \
  --autotune --autotune-cache "$tmp/tuned/cache.txt"
grep -q '^primc: warning: autotune cache .* ignored' "$tmp/err" && head -n 1 "$tmp/tuned/cache.txt" | grep -q '^# primc autotune cache' &&
  ok "a corrupt cache is ignored with a warning and rewritten" || bad "corrupt autotune cache" "$(cat "$tmp/err")"

# a compiled model links no BLAS (so no BLAS worker threads spinning beside the pool): on one thread it is
# one thread while it runs
"$B/primc" compile models/mlp/model.onnx -O2 -o "$tmp/mlp" >/dev/null 2>&1
ldd "$tmp/mlp" | grep -q -E 'openblas|gfortran' && bad "compiled model libraries" "$(ldd "$tmp/mlp")" ||
  ok "compiled model: no OpenBLAS or gfortran linked"
PRIMC_NUM_THREADS=1 "$tmp/mlp" models/mlp/input.npy --bench 3000000 >/dev/null 2>&1 &
pid=$!
sleep 0.5
seen=$(awk '/^Threads:/ {print $2}' "/proc/$pid/status" 2>/dev/null)
kill "$pid" 2>/dev/null
wait "$pid" 2>/dev/null
[ "$seen" = 1 ] && ok "compiled model on PRIMC_NUM_THREADS=1: one thread" || bad "compiled model threads" "'$seen' threads"

# --bench N --cold: every timed run after a cache flush; the outputs are those of a plain run
expect_exit 0 "compiled model --bench 3 --cold" "$tmp/mlp" models/mlp/input.npy --bench 3 --cold -o "$tmp/cold"
grep -q '^mlp: 3 runs, min ' "$tmp/out" || bad "--cold bench line" "$(head -n 1 "$tmp/out")"
"$tmp/mlp" models/mlp/input.npy -o "$tmp/warm" >/dev/null 2>&1
cmp -s "$tmp/cold/out0.npy" "$tmp/warm/out0.npy" && ok "--cold outputs = plain outputs" || bad "--cold outputs" "differ"
expect_exit 2 "--cold without --bench is a usage error" "$tmp/mlp" models/mlp/input.npy --cold

# the standalone driver asks for 2 MB pages for a workspace of 2 MB or more (two 1024x1024 products: the first
# one's 4 MB): where transparent huge pages are given on request ("madvise" mode), its mapping is then eligible
printf 'graph(%%x : f32[1024,1024]):\n  %%y = aten::matmul(%%x, %%x)\n  %%z = aten::matmul(%%y, %%y)\n  return (%%z)\n' >"$tmp/mm2.txt"
if "$P" compile "$tmp/mm2.txt" -O2 -o "$tmp/yolo" >/dev/null 2>&1; then
  "$tmp/yolo" --random-inputs --bench 1000000 >/dev/null 2>&1 &
  pid=$!
  elig=0
  for _ in $(seq 50); do
    if awk '/^Size:/ {s = $2} /^THPeligible:/ {if ($2 == 1 && s >= 4096) f = 1} END {exit !f}' "/proc/$pid/smaps" 2>/dev/null; then
      elig=1
      break
    fi
    sleep 0.1
  done
  kill "$pid" 2>/dev/null
  wait "$pid" 2>/dev/null
  thp=$(cat /sys/kernel/mm/transparent_hugepage/enabled 2>/dev/null)
  case "$thp" in
  *"[madvise]"*) [ "$elig" = 1 ] && ok "workspace eligible for huge pages" || bad "workspace huge pages" "no THP-eligible mapping of 4 MB or more" ;;
  *) echo "SKIP workspace huge pages: transparent huge pages are '$thp' here, so the madvise hint cannot be seen"
     skip=$((skip + 1)) ;;
  esac
else
  bad "compile two matmuls" "failed"
fi

# paths that are not regular files (a FIFO would block open() forever, a directory fails obscurely): one
# error line naming the path, exit 1, at once; for the model, its .safetensors, .npy inputs and the weights
mkfifo "$tmp/fifo.onnx" "$tmp/fifo.txt" "$tmp/fifo.npy" "$tmp/fifo.safetensors"
for m in "$tmp/fifo.onnx" "$tmp/fifo.txt" tests; do
  for c in run dump compile; do
    expect_exit 1 "$c on $(basename "$m") (not a regular file)" timeout 10 "$P" "$c" "$m" -o "$tmp/nr"
    grep -q 'not a regular file' "$tmp/err" || bad "$c $(basename "$m") message" "$(head -c 300 "$tmp/err")"
  done
done
printf 'graph(%%x : f32[1,4]):\n  %%w : f32[2,4] = constant(key="fc.weight")\n  %%y = aten::linear(%%x, %%w)\n  return (%%y)\n' >"$tmp/g.txt"
expect_exit 1 "safetensors weights a FIFO" timeout 10 "$P" run "$tmp/g.txt" --weights "$tmp/fifo.safetensors" --random-inputs
grep -q 'fifo.safetensors: not a regular file (a FIFO)' "$tmp/err" || bad "safetensors FIFO message" "$(head -c 300 "$tmp/err")"
expect_exit 1 "run: .npy input a FIFO" timeout 10 "$P" run models/mlp/model.onnx "$tmp/fifo.npy"
grep -q 'not a regular file (a FIFO)' "$tmp/err" || bad "run .npy FIFO message" "$(head -c 300 "$tmp/err")"

# the compiled model's own reads: .npy inputs and the weights file; a weights file is checked before use
# (header, size, checksum), and a packed header altered behind a good checksum fails the run with status 2
if "$P" compile models/mlp/model.onnx --weights external -o "$tmp/mx" >/dev/null 2>&1; then
  expect_exit 0 "external weights run" "$tmp/mx" models/mlp/input.npy
  expect_exit 1 "compiled: .npy input a FIFO" timeout 10 "$tmp/mx" "$tmp/fifo.npy"
  grep -q 'not a regular file (a FIFO)' "$tmp/err" || bad "compiled .npy FIFO message" "$(head -c 300 "$tmp/err")"
  expect_exit 1 "compiled: weights a FIFO" timeout 10 "$tmp/mx" models/mlp/input.npy --weights "$tmp/fifo.npy"
  grep -q 'not a regular file (a FIFO)' "$tmp/err" || bad "weights FIFO message" "$(head -c 300 "$tmp/err")"
  expect_exit 1 "compiled: weights a directory" "$tmp/mx" models/mlp/input.npy --weights tests
  cp "$tmp/mx.weights" "$tmp/w.orig"
  printf '\x01' | dd of="$tmp/mx.weights" bs=1 seek=100 conv=notrunc 2>/dev/null
  expect_exit 1 "compiled: a byte of the weights changed" "$tmp/mx" models/mlp/input.npy
  grep -q 'payload checksum mismatch' "$tmp/err" || bad "weights checksum message" "$(head -c 300 "$tmp/err")"
  head -c 1000 "$tmp/w.orig" >"$tmp/mx.weights"
  expect_exit 1 "compiled: truncated weights" "$tmp/mx" models/mlp/input.npy
  "$P" compile models/resnet_tiny/model.onnx --weights external -o "$tmp/rx" >/dev/null 2>&1
  expect_exit 1 "compiled: another model's weights" "$tmp/mx" models/mlp/input.npy --weights "$tmp/rx.weights"
  grep -q "not this model's weights size" "$tmp/err" || bad "other weights message" "$(head -c 300 "$tmp/err")"
  # the first packed GEMM header's ISA and panel width altered, the file's checksums made right again
  python3 - "$tmp/w.orig" "$tmp/mx.weights" <<'PY'
import struct, sys
sys.path.insert(0, "tests/ref")
from weights_checksum import checksum
b = bytearray(open(sys.argv[1], "rb").read())
o = next(o for o in range(64, len(b), 64) if b[o:o + 4] == b"GMPB")
struct.pack_into("<ii", b, o + 4, 0, 4096)
payload = bytes(b[64:])
struct.pack_into("<Q", b, 24, checksum(payload))
struct.pack_into("<Q", b, 56, checksum(bytes(b[:56])))
open(sys.argv[2], "wb").write(b)
PY
  expect_exit 1 "compiled: packed header altered behind a good checksum" "$tmp/mx" models/mlp/input.npy
  grep -q 'mx_run returned 2' "$tmp/err" || bad "altered packed header status" "$(head -c 300 "$tmp/err")"
else
  bad "compile mlp --weights external" "failed"
fi

# the driver frees what it allocated on its error exits too (LeakSanitizer in the executable)
if PRIMC_LDFLAGS="${PRIMC_LDFLAGS:-} -fsanitize=address" "$P" compile models/mlp/model.onnx -o "$tmp/ml" >/dev/null 2>&1; then
  for input in models/resnet_tiny/input.npy "$tmp/fifo.npy"; do
    ASAN_OPTIONS=detect_leaks=1 timeout 20 "$tmp/ml" "$input" >"$tmp/out" 2>"$tmp/err"
    if grep -q LeakSanitizer "$tmp/err"; then bad "driver error exit leaks ($input)" "$(grep -m3 'Direct leak' "$tmp/err")"
    elif grep -q '^error: ' "$tmp/err"; then ok "driver error exit frees its buffers ($input)"
    else bad "driver error exit ($input)" "$(head -c 300 "$tmp/err")"; fi
  done
else
  bad "compile mlp with -fsanitize=address" "failed"
fi

# primc inputs names every dim the model leaves open (a dim_param, -1, "?" and an empty dim), --dim takes those
# names and refuses one the model lacks, and --const fixes the mode input that selects between If branches of
# different shapes; the two builds match numpy's reference for each mode (tests/ref/gen_inputs_refs.py)
D=tests/data/inputs
expect_exit 0 "inputs lists the inputs" "$P" inputs $D/switch.onnx
want='input x    f32[batch, 3, x.dim2, x.dim3]
input mode i64[]
input bias f32[bias.dim0]
dims not fixed (set with --dim NAME=N or NAME=LO..HI):
  batch     1..(unbounded)
  x.dim2    1..(unbounded)
  x.dim3    1..(unbounded)
  bias.dim0 1..(unbounded)'
[ "$(cat "$tmp/out")" = "$want" ] && ok "inputs names -1, ? and empty dims" || bad "inputs text" "$(cat "$tmp/out")"
expect_exit 0 "inputs with --const and --dim" "$P" inputs $D/switch.onnx --const mode=1 --dim batch=1..8
grep -q '^const mode' "$tmp/out" && grep -q '^  batch     1\.\.8$' "$tmp/out" && ! grep -q '^input mode' "$tmp/out" &&
  ok "inputs shows --const and --dim applied" || bad "inputs with options" "$(cat "$tmp/out")"
dims="--dim batch=2 --dim x.dim2=4 --dim x.dim3=5 --dim bias.dim0=5"
# shellcheck disable=SC2086
expect_exit 1 "a branch on an input needs --const" "$P" compile $D/switch.onnx $dims -o "$tmp/sw"
grep -q "depends on graph input 'mode' (fix it with --const mode=VALUE)" "$tmp/err" && ok "the error names --const mode" ||
  bad "If on an input: error text" "$(cat "$tmp/err")"
expect_exit 1 "--dim of an unknown name" "$P" compile $D/switch.onnx --dim btach=2 -o "$tmp/sw"
grep -q -- '--dim btach: no input of the model has a dim of that name' "$tmp/err" && ok "--dim typo named" ||
  bad "--dim typo text" "$(cat "$tmp/err")"
for m in 0 1; do
  mkdir -p "$tmp/sw$m"
  # shellcheck disable=SC2086
  if "$P" compile $D/switch.onnx $dims --const mode=$m -o "$tmp/sw$m/m" >/dev/null 2>"$tmp/err" &&
    "$tmp/sw$m/m" $D/x.npy $D/bias.npy -o "$tmp/sw$m" >/dev/null 2>&1 &&
    python3 tests/compare_npy.py "$tmp/sw$m/out0.npy" $D/expected_mode$m.npy --rtol 1e-5 --atol 1e-6 >/dev/null 2>&1
  then ok "--const mode=$m build matches numpy"; else bad "--const mode=$m build" "$(head -c 300 "$tmp/err")"; fi
done
# the executable names the input, the dim, the size given and the size it was compiled for
python3 -c "import numpy as np; np.save('$tmp/x3.npy', np.zeros((3, 3, 4, 5), np.float32))"
expect_exit 1 "compiled: wrong batch refused" "$tmp/sw1/m" "$tmp/x3.npy" $D/bias.npy -o "$tmp/sw1"
grep -q 'input "x" dim 0 is 3, the model was compiled for 2 (\[2,3,4,5\], the file holds \[3,3,4,5\])' "$tmp/err" &&
  ok "wrong input dim: the message names it" || bad "wrong input dim text" "$(cat "$tmp/err")"
mkdir -p "$tmp/swr"
if "$P" run $D/switch.onnx $D/x.npy $D/bias.npy --const mode=$D/mode1.npy --dim x.dim3=5 --dim bias.dim0=5 \
  -o "$tmp/swr" >/dev/null 2>&1 &&
  python3 tests/compare_npy.py "$tmp/swr/out0.npy" $D/expected_mode1.npy --rtol 1e-5 --atol 1e-6 >/dev/null 2>&1
then ok "run --const NAME=FILE.npy matches numpy"; else bad "run --const .npy" "failed or differs"; fi
for c in "mode=1.5:is not exactly a i64" "mode=1,2:2 numbers given" "nosuch=1:no graph input of that name"; do
  # shellcheck disable=SC2086
  expect_exit 1 "--const ${c%%:*} refused" "$P" compile $D/switch.onnx $dims --const "${c%%:*}" -o "$tmp/swx"
  grep -q "${c#*:}" "$tmp/err" || bad "--const ${c%%:*} text" "$(cat "$tmp/err")"
done
expect_exit 2 "--const without a value is a usage error" "$P" compile $D/switch.onnx --const mode= -o "$tmp/swx"

# small things a user trips on: a bad --bench count and --weights on a build that holds its weights are usage
# errors of the executable; an unwritable -o names the path as given; --name must be a C identifier; a long
# output name keeps its symbols whole (they were cut at 95 characters, and the cut ones collided)
expect_exit 2 "exe --bench abc is a usage error" "$tmp/mlp" --random-inputs --bench abc
grep -q "^error: --bench takes a number of runs (1 or more), not 'abc'" "$tmp/err" || bad "--bench abc text" "$(cat "$tmp/err")"
expect_exit 2 "exe --weights on embedded weights" "$tmp/mlp" --random-inputs --weights "$tmp/none.weights"
grep -q 'holds its weights' "$tmp/err" || bad "--weights on embedded text" "$(cat "$tmp/err")"
expect_exit 1 "unwritable -o" "$P" compile models/mlp/model.onnx -o /nonexistent-dir/m
grep -q '^primc: error: cannot write /nonexistent-dir/m: its directory /nonexistent-dir does not exist$' "$tmp/err" &&
  ok "unwritable -o named as given" || bad "unwritable -o text" "$(cat "$tmp/err")"
expect_exit 1 "--name 9x refused" "$P" compile models/mlp/model.onnx -o "$tmp/n9" --name 9x
grep -q "is not a C identifier" "$tmp/err" || bad "--name 9x text" "$(cat "$tmp/err")"
long=$tmp/$(printf 'm%.0s' $(seq 230))
mkdir -p "$tmp/long"
if "$P" compile models/mlp/model.onnx -O2 -o "$long" >/dev/null 2>"$tmp/err" && "$long" models/mlp/input.npy -o "$tmp/long" >/dev/null 2>&1 &&
  python3 tests/compare_npy.py "$tmp/long/out0.npy" models/mlp/expected.npy --rtol 1e-4 --atol 1e-5 >/dev/null 2>&1
then ok "a 230-character output name links and runs"; else bad "long output name" "$(head -c 300 "$tmp/err")"; fi

# primc check lists every node that cannot be imported at once, grouped (three different problems over four
# nodes; the node reading a failed output is counted apart), and compile lists them after its error
expect_exit 1 "check: a model with three unsupported ops" "$P" check tests/data/onnx_bad/three_unsupported.onnx
grep -q '4 nodes cannot be imported (3 problems)' "$tmp/out" && grep -q '2 nodes: unsupported op NotAnOp .*"n1", "n2"' "$tmp/out" &&
  grep -q '1 node: unsupported op Frobnicate .*"f"' "$tmp/out" && grep -q "op FooBar of domain 'com.example' .*\"m\"" "$tmp/out" &&
  grep -q '^1 more node reads only the output of those' "$tmp/out" && ok "check names all three" || bad "check text" "$(cat "$tmp/out")"
expect_exit 1 "compile: a model with three unsupported ops" "$P" compile tests/data/onnx_bad/three_unsupported.onnx -o "$tmp/x3"
grep -q '^primc: error: .*NotAnOp "n1"' "$tmp/err" && grep -q 'Frobnicate' "$tmp/err" && grep -q 'FooBar' "$tmp/err" &&
  ok "compile lists every problem, not only the first" || bad "compile problems" "$(cat "$tmp/err")"
expect_exit 0 "check: a model that imports" "$P" check models/mlp/model.onnx
grep -q 'every node imports' "$tmp/out" || bad "check ok text" "$(cat "$tmp/out")"
expect_exit 1 "check: open dims" "$P" check tests/data/inputs/switch.onnx --const mode=0
grep -q '^dims a compile needs fixed (--dim NAME=N): batch, x.dim2, x.dim3' "$tmp/out" || bad "check dims text" "$(cat "$tmp/out")"

# --profile: per-kernel min and median beside the totals; --trace: a Chrome trace of the same calls, checked
# against the trace event format (every X event named, timed, on a track), its durations adding up to the table's,
# and the pool workers' shares on tracks of their own named by their kernel
if "$P" compile models/resnet_tiny/model.onnx -O2 --profile -o "$tmp/prof" >/dev/null 2>"$tmp/err" &&
  "$tmp/prof" models/resnet_tiny/input.npy --bench 4 --profile --trace "$tmp/trace.json" >"$tmp/prof.txt" 2>"$tmp/err" &&
  python3 - "$tmp/prof.txt" "$tmp/trace.json" >"$tmp/chk" 2>&1 <<'PY'
import json, sys
rows = [l.split() for l in open(sys.argv[1]) if l.strip() and not l.startswith(("#", "kernel", "prof:"))]
rows = [r for r in rows if r[0].startswith("k") and len(r) == 9]
assert rows, "no profile rows"
total = {}
for k, name, origin, calls, tot, pct, moved, lo, med in rows:
    assert int(calls) == 4, (k, calls)
    # the table prints 4 decimals: each figure is off by up to 5e-5 ms, four mins by 2e-4
    assert 0 <= float(lo) <= float(med) and float(lo) * 4 <= float(tot) * 1.001 + 3e-4, (k, lo, med, tot)
    total[k] = float(tot)
d = json.load(open(sys.argv[2]))
named = {e["tid"] for e in d["traceEvents"] if e["ph"] == "M" and e["name"] == "thread_name"}
shares = [e for e in d["traceEvents"] if e["ph"] == "X" and e["tid"] != 1]
for e in shares:  # pool workers' shares: on a named track of their own, named by the kernel they belong to
    assert e["tid"] in named and e["cat"] == "share" and e["name"].split()[0] in total or e["name"] == "pool work", e
ev = [e for e in d["traceEvents"] if e["ph"] == "X" and e["tid"] == 1]
assert 1 in named and len(ev) == 4 * len(rows), (len(ev), len(rows))
got = {}
for e in ev:
    assert isinstance(e["name"], str) and e["ts"] >= 0 and e["dur"] >= 0 and isinstance(e["pid"], int) and isinstance(e["tid"], int)
    assert "origin" in e["args"]
    k = e["name"].split()[0]
    got[k] = got.get(k, 0) + e["dur"] / 1e3
for k, t in total.items():
    assert abs(got[k] - t) <= 0.01 * t + 1e-3, (k, got[k], t)
print("ok", len(rows), "kernels", len(ev), "calls", len(shares), "pool shares")
PY
then ok "--profile min/median and --trace JSON agree ($(cat "$tmp/chk"))"; else bad "--profile/--trace" "$(cat "$tmp/chk" "$tmp/err" | tail -n 5)"; fi
expect_exit 2 "--trace needs a --profile build" "$tmp/mlp" --random-inputs --trace "$tmp/t2.json"

# a ResNet-18 (bench/gen_resnet.py) traced at 2 threads validates against the Trace Event Format's schema
# (tests/data/trace/trace_event.schema.json), with the pool's shares on a second track; a trace missing an X
# event's duration does not
if python3 bench/gen_resnet.py "$tmp/r18" --depth 18 >/dev/null 2>"$tmp/err" &&
  "$P" compile "$tmp/r18/model.onnx" --profile -o "$tmp/r18/m" -q 2>"$tmp/err" &&
  PRIMC_NUM_THREADS=2 "$tmp/r18/m" "$tmp/r18/input.npy" --profile --trace "$tmp/r18/t.json" >/dev/null 2>"$tmp/err" &&
  python3 - "$tmp/r18/t.json" tests/data/trace/trace_event.schema.json >"$tmp/chk" 2>&1 <<'PY'
import copy, json, sys
import jsonschema
trace, schema = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
jsonschema.validate(trace, schema)
tids = {e["tid"] for e in trace["traceEvents"] if e["ph"] == "X"}
assert len(tids) >= 2, tids
broken = copy.deepcopy(trace)
next(e for e in broken["traceEvents"] if e["ph"] == "X").pop("dur")
try:
    jsonschema.validate(broken, schema)
    sys.exit("a trace without an X event's dur validated")
except jsonschema.ValidationError:
    pass
print("ok", len(trace["traceEvents"]), "events on", len(tids), "tracks")
PY
then ok "ResNet-18's 2-thread trace validates against the trace event schema ($(cat "$tmp/chk"))"
else bad "ResNet-18 trace schema" "$(cat "$tmp/chk" "$tmp/err" | tail -n 5)"; fi

# progress: on a terminal (script gives one) a compile shows its phases and kernel N of M, then the time;
# --quiet, and stderr that is not a terminal, show nothing
PRIMC_PROGRESS_AFTER=0 script -qec "$P compile models/encoder_tiny/model.onnx -o $tmp/pg" /dev/null >"$tmp/tty" 2>&1
grep -a -q 'primc: [A-Za-z ]* ([0-9.]* s)' "$tmp/tty" && grep -a -q 'primc: compiled in [0-9.]* s' "$tmp/tty" &&
  ok "progress on a terminal" || bad "progress on a terminal" "$(od -c "$tmp/tty" | head -5)"
PRIMC_PROGRESS_AFTER=0 script -qec "$P compile models/encoder_tiny/model.onnx -o $tmp/pg --quiet" /dev/null >"$tmp/tty" 2>&1
! grep -a -q 'primc:' "$tmp/tty" && ok "--quiet: no progress" || bad "--quiet" "$(od -c "$tmp/tty" | head -5)"
PRIMC_PROGRESS_AFTER=0 "$P" compile models/resnet_tiny/model.onnx -o "$tmp/pg" >/dev/null 2>"$tmp/err"
[ ! -s "$tmp/err" ] && ok "no progress when stderr is not a terminal" || bad "progress off a terminal" "$(head -c 200 "$tmp/err")"

# a write that fails says why (here a full disk, as /dev/full is)
if [ -w /dev/full ]; then
  expect_exit 1 "--emit cuda onto a full disk" "$P" compile models/mlp/model.onnx --emit cuda -o /dev/full
  grep -q 'cannot write /dev/full: No space left on device' "$tmp/err" && ok "its message says why" ||
    bad "its message says why" "$(head -c 300 "$tmp/err")"
else
  skipped "a write onto a full disk: no writable /dev/full"
fi

suite_end cli
