#!/usr/bin/env bash
# tools/setup.sh: installs what primc builds and tests with; does nothing when all is present.
set -euo pipefail

apt_pkgs=(llvm-19-dev libprotobuf-c-dev protobuf-c-compiler libopenblas-dev libonnx-dev)
py_pkgs=(onnx onnxruntime numpy)
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
