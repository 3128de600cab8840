#!/usr/bin/env bash
# tests/suites/python.sh: the Python package (python/) as a user installs it: `pip install` of a copy of python/
# (so the tree stays clean) into a temporary dir, bundling this build's libprimc.so and libprimc_rt.a, then its
# pytest tests (python/tests/) run from outside the tree against ONNX Runtime. It fails closed: a failed install, a
# library that does not load or a test file that does not import are failures, and pytest's own count is added.
set -u
B=${B:-build}
PY=${PYTHON:-python3}
. tests/suite_lib.sh
Babs=$(cd "$B" 2>/dev/null && pwd || echo "$PWD/$B")

mkdir -p "$tmp/src"
cp -r python/pyproject.toml python/setup.py python/primc "$tmp/src/" && rm -rf "$tmp/src/primc/_lib"
# no build isolation: setuptools and wheel come from tools/setup.sh, not from the network
if PRIMC_BUILD_DIR=$Babs "$PY" -m pip install -q --no-build-isolation --no-deps --target "$tmp/site" "$tmp/src" \
  >"$tmp/pip.log" 2>&1; then
  ok "pip install ./python"
else
  bad "pip install ./python" "$(grep -v WARNING "$tmp/pip.log" | tail -n 5)"
fi

# a library built with sanitizers (make check-asan) needs their runtime loaded first in a Python process
preload=
case "${PRIMC_LDFLAGS:-}" in *-fsanitize=address*) preload=$(cc -print-file-name=libasan.so) ;; esac

(cd "$tmp" && env PRIMC_TEST_SITE="$tmp/site" PYTHONPATH="$tmp/site" PRIMC_SRC="$OLDPWD" \
  ${preload:+LD_PRELOAD=$preload ASAN_OPTIONS=${ASAN_OPTIONS:-}:detect_leaks=0} \
  timeout 900 "$PY" -m pytest -rA -p no:cacheprovider "$OLDPWD/python/tests") >"$tmp/pytest.log" 2>&1
rc=$?
grep -E '^(PASSED|FAILED|ERROR|SKIPPED)' "$tmp/pytest.log"
summary=$(grep -E '^=+ .*(passed|failed|error|skipped|no tests ran).* in [0-9.]+s' "$tmp/pytest.log" | tail -n 1)
count() { echo "$summary" | grep -oE "[0-9]+ $1" | grep -oE '[0-9]+' || echo 0; }
p=$(count passed) f=$(count failed) e=$(count error) k=$(count skipped)
pass=$((pass + p)) fail=$((fail + f + e)) skip=$((skip + k))
if [ "$rc" -ne 0 ] && [ $((f + e)) -eq 0 ]; then
  bad "pytest" "exit $rc with no failure counted: $(tail -n 5 "$tmp/pytest.log")"
elif [ "$rc" -ne 0 ]; then
  grep -E '^E  ' "$tmp/pytest.log" | head -n 30
fi
[ "$p" -gt 0 ] || bad "pytest" "no test passed: $(tail -n 3 "$tmp/pytest.log")"
suite_end python
