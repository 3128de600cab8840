# tests/suite_lib.sh: what the shell suites under tests/suites/ share (sourced from the repository root): a
# temporary dir, PASS/FAIL/SKIP counting, expect_exit, and the closing "N passed, M failed, K skipped" line.
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
pass=0
fail=0
skip=0

ok() { echo "PASS $1"; pass=$((pass + 1)); }
bad() { echo "FAIL $1: $2"; fail=$((fail + 1)); }
skipped() { echo "SKIP $1"; skip=$((skip + 1)); }

# expect_exit CODE NAME CMD...: CMD exits with CODE (stdout in $tmp/out, stderr in $tmp/err); it runs under a
# limit of SUITE_TIMEOUT seconds (default 300), so a hang fails instead of stalling the suite
expect_exit() {
  local want=$1 name=$2
  shift 2
  timeout "${SUITE_TIMEOUT:-300}" "$@" >"$tmp/out" 2>"$tmp/err"
  local rc=$?
  if [ "$rc" -eq "$want" ]; then ok "$name"; else bad "$name" "exit $rc, wanted $want: $(head -c 300 "$tmp/err")"; fi
}

# suite_end NAME: the closing line tests/run.sh reads, and the suite's exit status
suite_end() {
  echo "$1: $pass passed, $fail failed, $skip skipped"
  [ "$fail" -eq 0 ]
}
