#!/usr/bin/env bash
# tools/setup.sh: installs what primc builds and tests with; does nothing when all is present.
# Python test deps: onnx, onnxruntime, numpy; pytest for python/tests; wheel, so that `pip install
# --no-build-isolation ./python` (tests/suites/python.sh) builds without the network.
# Usage: tools/setup.sh [models] [bench]
#   models: Debian's python3-torch, python3-torchvision and python3-onnx (torch 1.13 for /usr/bin/python3) to
#           export the zoo and write the gradient references (tests/ref/gen_grad_refs.py)
#   bench:  PyPI's torch and torchvision (2.x, torch.compile; several GB), openvino and matplotlib, the benchmark peers
set -euo pipefail

# gcc-aarch64-linux-gnu, libc6-dev-arm64-cross and qemu-user: the AArch64 runtime and its tests under emulation
apt_pkgs=(llvm-19-dev libprotobuf-c-dev protobuf-c-compiler libopenblas-dev libonnx-dev gcc-aarch64-linux-gnu
  libc6-dev-arm64-cross qemu-user)
py_pkgs=(onnx onnxruntime numpy pytest wheel)
for extra in "$@"; do
  case $extra in
  models) apt_pkgs+=(python3-torch python3-torchvision python3-onnx) ;;
  bench) py_pkgs+=(torch torchvision openvino matplotlib) ;;
  *) echo "setup: unknown extra '$extra' (models, bench)" >&2; exit 2 ;;
  esac
done
PY=${PYTHON:-python3}

missing=()
for p in "${apt_pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  SUDO=""
  [ "$(id -u)" -ne 0 ] && SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi

pymissing=()
for p in "${py_pkgs[@]}"; do
  "$PY" -c "import $p" 2>/dev/null || pymissing+=("$p")
done
if [ ${#pymissing[@]} -gt 0 ]; then
  echo "setup: pip installing ${pymissing[*]}"
  "$PY" -m pip install -q "${pymissing[@]}"
fi
exit 0
