#!/usr/bin/env bash
# tests/suites/aarch64.sh: the AArch64 target under qemu-aarch64 (issue 27). The runtime's own unit tests cross-built
# ($B/aarch64/test_rt: the NEON GEMM row and every conv row against their references, each on the ISA this CPU
# runs); every bundled model compiled with --triple aarch64-linux-gnu into a static executable whose output matches
# ONNX Runtime's (1e-5 relative), and the dynamic encoder in buckets of seq; one compiled ONNX node test per op (the first the expected list holds for it,
# bfloat16 tests left out: .npy, the executable's format, has no bfloat16);
# an application embedding a cross-compiled .o; and the NEON GEMM inner loop's fmla share in the emitted code
# (tests/neon_fma.py, >= 75%). Where the cross compiler or qemu-user is missing, one skip says so; a missing cross
# runtime (make builds it beside them) fails.
set -u
B=${B:-build}
. tests/suite_lib.sh
A64=$B/aarch64
T=aarch64-linux-gnu
QEMU=${QEMU_AARCH64:-qemu-aarch64}

missing=""
command -v "$T-gcc" >/dev/null || missing="$T-gcc"
command -v "$QEMU" >/dev/null || missing="$missing $QEMU"
if [ -n "$missing" ]; then
  echo "SKIP aarch64: missing $missing (tools/setup.sh installs gcc-aarch64-linux-gnu and qemu-user)"
  skip=1
  suite_end aarch64
  exit
fi
# with the cross compiler there, make builds the cross runtime: its absence is a failure, not a skip
if [ ! -f "$A64/libprimc_rt.a" ] || [ ! -x "$A64/test_rt" ]; then
  bad "cross runtime" "no $A64/libprimc_rt.a or $A64/test_rt: make builds them"
  suite_end aarch64
  exit
fi

# the runtime's unit tests under emulation
if timeout 600 "$QEMU" "$A64/test_rt" >"$tmp/rt.log" 2>&1 && tail -n 1 "$tmp/rt.log" | grep -q ' 0 failed'; then
  ok "runtime unit tests on aarch64: $(tail -n 1 "$tmp/rt.log")"
else
  bad "runtime unit tests on aarch64" "$(grep -E 'FAIL|failed' "$tmp/rt.log" | head -n 5)"
fi
grep -q '^SKIP gemm_row_NEON' "$tmp/rt.log" && bad "gemm_row_NEON" "skipped under qemu-aarch64: the NEON row did not run"

# the NEON GEMM micro-kernel's inner loop, from the cross-built object
if python3 tests/neon_fma.py "$A64/runtime/gemm/neon.o" >"$tmp/fma.log" 2>&1; then
  ok "NEON GEMM inner loop: $(cat "$tmp/fma.log")"
else
  bad "NEON GEMM inner loop" "$(cat "$tmp/fma.log")"
fi

# run-time dims in buckets (--dim seq=1..32:8: five programs and the dispatcher, one static link) for aarch64, at a
# size in the middle bucket against ONNX Runtime's output (models/dynamic/make.py)
enc=models/dynamic/seq_encoder
if "$B/primc" compile $enc/model.onnx --dim batch=2 --dim seq=1..32:8 --triple $T -o "$tmp/bk.a64" -q >"$tmp/bk.log" 2>&1 &&
  timeout 300 "$QEMU" "$tmp/bk.a64" $enc/in_2x13_0.npy $enc/in_2x13_1.npy -o "$tmp/bk" >>"$tmp/bk.log" 2>&1 &&
  python3 tests/compare_npy.py "$tmp/bk/out0.npy" $enc/expected_2x13.npy --rtol 1e-4 --atol 1e-5 >>"$tmp/bk.log" 2>&1; then
  ok "aarch64 buckets of seq at 2x13: $(tail -n 1 "$tmp/bk.log")"
else
  bad "aarch64 buckets of seq" "$(tail -n 3 "$tmp/bk.log")"
fi
rm -f "$tmp/bk.a64"

# every bundled model, compiled for aarch64 and run under emulation, against ONNX Runtime's output
for d in models/*/; do
  [ -f "$d/model.onnx" ] || continue
  name=$(basename "$d")
  exe=$tmp/$name.a64
  if "$B/primc" compile "$d/model.onnx" --triple $T -o "$exe" -q >"$tmp/$name.log" 2>&1 &&
    timeout 300 "$QEMU" "$exe" "$d/input.npy" -o "$tmp/$name" >>"$tmp/$name.log" 2>&1 &&
    python3 tests/compare_npy.py "$tmp/$name/out0.npy" "$d/expected.npy" --rtol 1e-5 --atol 1e-6 >>"$tmp/$name.log" 2>&1; then
    ok "aarch64 $name: $(tail -n 1 "$tmp/$name.log")"
  else
    bad "aarch64 $name" "$(tail -n 3 "$tmp/$name.log")"
  fi
  rm -f "$exe"
done

# the attention planner decides for the target: the host fuses encoder_tiny's attention where its AVX-512 row
# pays, a cross compile keeps the GEMMs (the call's plain C row is all AArch64 has)
host_calls=$("$B/primc" compile models/encoder_tiny/model.onnx -o "$tmp/enc" -q --report | grep -c primc_k_attention)
a64_calls=$("$B/primc" compile models/encoder_tiny/model.onnx --triple $T -o "$tmp/enc" -q --report | grep -c primc_k_attention)
if [ "$a64_calls" -eq 0 ] && { [ "$host_calls" -gt 0 ] || ! grep -qw avx512f /proc/cpuinfo; }; then
  ok "attention planned for the target: $host_calls fused calls on this host, $a64_calls for aarch64"
else
  bad "attention planned for the target" "$host_calls fused calls on this host, $a64_calls for aarch64"
fi

# a missing cross runtime is an error that says where it looks, not a link failure
expect_exit 1 "a triple without a runtime names what is missing" "$B/primc" compile models/mlp/model.onnx \
  --triple riscv64-linux-gnu -o "$tmp/rv" -q
grep -q 'no primc runtime for riscv64-linux-gnu' "$tmp/err" || bad "riscv64 message" "$(head -c 300 "$tmp/err")"

# one compiled node test per op, each an aarch64 executable run on the test's data under emulation
D=${ONNX_NODE_DIR_GEN:-$B/onnx-node-tests}
if bash tests/node_tests.sh "$D" "$B/onnx-node-gen.log" >"$tmp/gen.log"; then
  mkdir -p "$tmp/node"
  python3 - "$D" tests/conformance_expected.txt "$tmp/node" >"$tmp/pick.log" 2>&1 <<'EOF'
import os, sys
import onnx
src, expected, dst = sys.argv[1:]
seen = {}
for name in open(expected).read().split():
    # bfloat16 has no .npy encoding: the executable cannot take or give it
    if name.startswith("#") or "_expanded" in name or "bfloat16" in name.lower() or \
            not os.path.isfile(os.path.join(src, name, "model.onnx")):
        continue
    m = onnx.load(os.path.join(src, name, "model.onnx"), load_external_data=False)
    if len(m.graph.node) != 1:
        continue
    op = (m.graph.node[0].domain or "ai.onnx") + "." + m.graph.node[0].op_type
    if op not in seen:
        seen[op] = name
        os.symlink(os.path.abspath(os.path.join(src, name)), os.path.join(dst, name))
print(len(seen), "ops")
EOF
  ls "$tmp/node" >"$tmp/node.list"
  n_ops=$(wc -l <"$tmp/node.list")
  timeout 600 "$B/primc" conformance --dir "$tmp/node" --compiled --triple $T --runner "$QEMU" \
    --expected "$tmp/node.list" >"$tmp/node.log" 2>&1
  rc=$?
  passed=$(grep -c '^PASS' "$tmp/node.log")
  if [ "$rc" -eq 0 ] && [ "$passed" -eq "$n_ops" ] && [ "$n_ops" -ge 100 ]; then
    ok "node tests on aarch64: one per op, $passed of $n_ops ops pass"
  else
    bad "node tests on aarch64" "$passed of $n_ops ops pass (exit $rc): $(grep -E '^(FAIL|UNSUPPORTED)' "$tmp/node.log" | head -n 5)"
  fi
else
  bad "node tests on aarch64" "$(cat "$tmp/gen.log")"
fi
suite_end aarch64
