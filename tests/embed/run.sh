#!/usr/bin/env bash
# tests/embed/run.sh: builds an app against only m.o, m.h and libprimc_rt.a (weights inside, then external; and for
# AArch64 under qemu) and checks it against onnxruntime.
# PRIMC_LDFLAGS (make check-asan: the sanitizers libprimc_rt.a was built with) is added to the link.
set -u
cd "$(dirname "$0")/../.."
B=${B:-build}
PY=${PYTHON:-python3}
T=$(mktemp -d /tmp/primc-embed-XXXXXX)
trap 'rm -rf "$T"' EXIT
pass=0
fail=0
"$PY" tests/embed/make_model.py "$T" || { echo "embed: 0 passed, 1 failed, 0 skipped"; exit 1; }
for variant in embedded external; do
  name=m_$variant
  if "$B/primc" compile "$T/model.onnx" --emit obj --weights "$variant" --name "$name" -o "$T/$name.o" &&
    cc -std=c11 -O2 -I"$T" -DMODEL_HEADER="\"$name.h\"" -DMODEL="$name" tests/embed/main.c "$T/$name.o" \
      "$B/libprimc_rt.a" ${PRIMC_LDFLAGS:-} -lm -lpthread -o "$T/app_$variant" &&
    "$T/app_$variant" "$T/input.bin" "$T/ref.bin" "$T/$name.weights"; then
    pass=$((pass + 1))
  else
    echo "FAIL embed ($variant weights)"
    fail=$((fail + 1))
  fi
done
# the same app for AArch64: the .o cross-compiled and linked by the cross compiler against the AArch64 runtime, run
# under qemu-aarch64 (a skip where they are missing)
skip=0
if command -v aarch64-linux-gnu-gcc >/dev/null && command -v qemu-aarch64 >/dev/null && [ -f "$B/aarch64/libprimc_rt.a" ]; then
  if "$B/primc" compile "$T/model.onnx" --emit obj --triple aarch64-linux-gnu --name m_a64 -o "$T/m_a64.o" &&
    aarch64-linux-gnu-gcc -std=c11 -O2 -static -I"$T" -DMODEL_HEADER='"m_a64.h"' -DMODEL=m_a64 tests/embed/main.c \
      "$T/m_a64.o" "$B/aarch64/libprimc_rt.a" -lm -lpthread -o "$T/app_a64" &&
    qemu-aarch64 "$T/app_a64" "$T/input.bin" "$T/ref.bin"; then
    pass=$((pass + 1))
  else
    echo "FAIL embed (aarch64)"
    fail=$((fail + 1))
  fi
else
  echo "SKIP embed (aarch64): no aarch64-linux-gnu-gcc, qemu-aarch64 or $B/aarch64/libprimc_rt.a"
  skip=1
fi
# a training step embedded: the state swapped by the application, the losses against torch.optim's
"$PY" -c "import numpy as np; d = np.load('tests/data/train/mlp_mse_sgd.npz'); d['x'].tofile('$T/x.bin'); d['y'].tofile('$T/y.bin'); d['losses'].astype(np.float64).tofile('$T/losses.bin')"
if "$B/primc" compile models/mlp/model.onnx --train --optimizer sgd --lr 0.1 --weight-decay 0.01 --emit obj --name mlp_train -o "$T/mlp_train.o" &&
  cc -std=c11 -O2 -I"$T" -DMODEL_HEADER='"mlp_train.h"' -DMODEL=mlp_train tests/embed/train.c "$T/mlp_train.o" \
    "$B/libprimc_rt.a" ${PRIMC_LDFLAGS:-} -lm -lpthread -o "$T/app_train" &&
  "$T/app_train" "$T/x.bin" "$T/y.bin" "$T/losses.bin"; then
  pass=$((pass + 1))
else
  echo "FAIL embed (training step)"
  fail=$((fail + 1))
fi
echo "embed: $pass passed, $fail failed, $skip skipped"
[ "$fail" -eq 0 ]
