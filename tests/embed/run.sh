#!/usr/bin/env bash
# tests/embed/run.sh: builds an app against only m.o, m.h and libprimc_rt.a (weights inside, then external) and checks it against onnxruntime.
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
echo "embed: $pass passed, $fail failed, 0 skipped"
[ "$fail" -eq 0 ]
