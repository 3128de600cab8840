#!/usr/bin/env bash
# tests/suites/api.sh: the public C API as a user of libprimc.so meets it: examples/compile_and_run.c builds against
# nothing but include/primc.h and -lprimc (copied apart from the tree, so no internal header is reachable), compiles
# models/mlp to a shared library and runs it against its ONNX Runtime reference; a bad model is one error line; the
# header is pedantic C99 and valid C++; libprimc.so exports exactly the functions primc.h declares.
set -u
B=${B:-build}
. tests/suite_lib.sh
Babs=$(cd "$B" 2>/dev/null && pwd || echo "$B")

mkdir -p "$tmp/inc" "$tmp/app"
cp include/primc.h "$tmp/inc/" && cp examples/compile_and_run.c "$tmp/app/"
# shellcheck disable=SC2086
expect_exit 0 "example builds with only primc.h and -lprimc" cc -std=c11 -Wall -Wextra -Werror \
  -I"$tmp/inc" "$tmp/app/compile_and_run.c" -L"$Babs" -lprimc -ldl -lm ${PRIMC_LDFLAGS:-} -Wl,-rpath,"$Babs" \
  -o "$tmp/app/compile_and_run"
expect_exit 0 "example compiles models/mlp and matches ONNX Runtime" "$tmp/app/compile_and_run" \
  models/mlp/model.onnx "$tmp/app/mlp.so" models/mlp/input.npy models/mlp/expected.npy
grep -q "matches models/mlp/expected.npy: yes" "$tmp/out" && [ -f "$tmp/app/mlp.h" ] &&
  ok "example output checked, header written beside the library" ||
  bad "example output" "$(head -c 300 "$tmp/out")"
expect_exit 1 "example on a missing model fails" "$tmp/app/compile_and_run" "$tmp/none.onnx" "$tmp/app/x.so"
grep -q "error: .*none.onnx" "$tmp/err" && ok "the error names the model path" || bad "error message" "$(head -c 300 "$tmp/err")"
expect_exit 0 "primc.h is pedantic C99" cc -std=c99 -pedantic -fsyntax-only -Wall -Wextra -Werror -x c "$tmp/inc/primc.h"
expect_exit 0 "primc.h compiles as C++" c++ -fsyntax-only -Wall -Wextra -Werror -x c++ "$tmp/inc/primc.h"

# exported == declared: nothing of the compiler or the runtime leaks out of libprimc.so
declared=$(grep -oE '\bprimc_[a-z_]+\(' include/primc.h | tr -d '(' | sort -u)
exported=$(nm -D --defined-only "$B/libprimc.so" 2>/dev/null | awk '{print $3}' | sort -u)
if [ -n "$exported" ] && [ "$declared" = "$exported" ]; then
  ok "libprimc.so exports the $(echo "$declared" | wc -l) functions of primc.h, nothing else"
else
  bad "exports" "$(diff <(echo "$declared") <(echo "$exported") | head -n 10)"
fi
suite_end api
