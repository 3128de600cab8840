#!/usr/bin/env bash
# tools/gpu_bundle.sh: packs the built primc, test_primc and runtime with the shared libraries they load, so the
# test suite's GPU parts run on a GPU machine that has the CUDA driver and NVRTC but not LLVM or protobuf-c.
# Usage: tools/gpu_bundle.sh [DIR]   (default .gpu-bundle; then, on the GPU machine, in a checkout holding DIR:
#   source DIR/env.sh   # unpacks the libraries and node tests, puts the binaries in build/, sets LD_LIBRARY_PATH
#   build/test_primc cuda && bash tests/suites/cuda.sh)
set -euo pipefail
cd "$(dirname "$0")/.."
B=${B:-build}
DIR=${1:-.gpu-bundle}
for f in "$B/primc" "$B/test_primc" "$B/libprimc_rt.a"; do
  [ -f "$f" ] || { echo "gpu_bundle: $f is missing: run make first" >&2; exit 1; }
done
rm -rf "$DIR"
mkdir -p "$DIR/bin" "$DIR/lib"
cp "$B/primc" "$B/test_primc" "$B/libprimc_rt.a" "$DIR/bin/"
strip "$DIR/bin/primc" "$DIR/bin/test_primc"
strip --strip-debug "$DIR/bin/libprimc_rt.a"
# every library the binaries load but the C runtime's own, which the GPU machine's newer system has, and but
# libz3 and libxml2 (with ICU's 31 MB behind it): LLVM links them for tools primc never runs, so stubs with
# their sonames (and libxml2's symbol versions and its one data symbol) keep the bundle under the transfer limit
ldd "$B/primc" "$B/test_primc" | awk '$2 == "=>" && $3 ~ /^\// {print $3}' | sort -u |
  grep -vE '/(libc|libm|libdl|libpthread|librt|libstdc\+\+|libgcc_s|ld-linux[^/]*|libz3|libxml2|libicu[a-z]*)\.so' |
  while read -r lib; do cp -L "$lib" "$DIR/lib/"; done
printf 'void *xmlFree = 0;\nvoid pc_stub_xml26(void) {}\n' >"$DIR/xml.c"
printf 'LIBXML2_2.4.30 { global: xmlFree; local: *; };\nLIBXML2_2.6.0 { global: pc_stub_xml26; } LIBXML2_2.4.30;\n' >"$DIR/xml.map"
cc -shared -fPIC -o "$DIR/lib/libxml2.so.2" -Wl,-soname,libxml2.so.2 -Wl,--version-script="$DIR/xml.map" "$DIR/xml.c"
: >"$DIR/z3.c"
cc -shared -fPIC -o "$DIR/lib/libz3.so.4" -Wl,-soname,libz3.so.4 "$DIR/z3.c"
rm -f "$DIR/xml.c" "$DIR/xml.map" "$DIR/z3.c"
tar -C "$DIR/lib" -cf - . | xz -T0 -6 >"$DIR/libs.tar.xz"
rm -rf "$DIR/lib"
# the node tests (56 MB as files, 2.5 MB packed): with the libraries they would pass a 64 MB transfer limit
D=${ONNX_NODE_DIR_GEN:-$B/onnx-node-tests}
if [ -f "$D/.complete" ]; then
  tar -C "$D" -cf - . | xz -T0 -6 >"$DIR/node-tests.tar.xz" # unpacked where the suites look by default
else
  echo "gpu_bundle: no $D/.complete: the bundle holds no node tests (tests/suites/conformance.sh writes them)" >&2
fi
cat >"$DIR/env.sh" <<'EOF'
# sourced on the GPU machine from the checkout's root: the bundle's libraries and binaries in place
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
mkdir -p /tmp/primc-libs build
tar -C /tmp/primc-libs -xJf "$here/libs.tar.xz"
cp "$here/bin/primc" "$here/bin/test_primc" "$here/bin/libprimc_rt.a" build/
[ ! -f "$here/node-tests.tar.xz" ] || { mkdir -p build/onnx-node-tests && tar -C build/onnx-node-tests -xJf "$here/node-tests.tar.xz"; }
export LD_LIBRARY_PATH=/tmp/primc-libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export PRIMC_SRC=$PWD
EOF
echo "gpu_bundle: $DIR ($(du -sh "$DIR" | cut -f1)): carry it to the GPU machine and source $DIR/env.sh there"
