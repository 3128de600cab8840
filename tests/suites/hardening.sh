#!/usr/bin/env bash
# tests/suites/hardening.sh: hostile or absurd input to primc and its artifacts (issue 26): no shell, no crash,
# no hang, a clear error and a non-zero exit.
set -u
B=${B:-build}
P=$PWD/$B/primc
SRC=$PWD
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
pass=0
fail=0

ok() { echo "PASS $1"; pass=$((pass + 1)); }
bad() { echo "FAIL $1: $2"; fail=$((fail + 1)); }

# expect_exit CODE NAME CMD...: CMD exits with CODE (run with a time limit: a hang is a failure)
expect_exit() {
  local want=$1 name=$2
  shift 2
  timeout 300 "$@" >"$tmp/out" 2>"$tmp/err"
  local rc=$?
  if [ "$rc" -eq "$want" ]; then ok "$name"; else bad "$name" "exit $rc, wanted $want: $(head -c 300 "$tmp/err")"; fi
}

# ---- no shell: the linker runs from an argument vector, so an output path is only a path
mkdir -p "$tmp/sh"
evil="x'; touch PWNED; echo '"
(cd "$tmp/sh" && timeout 300 "$P" compile "$SRC/models/mlp/model.onnx" -o "$evil" >/dev/null 2>"$tmp/err")
rc=$?
[ ! -e "$tmp/sh/PWNED" ] && ok "-o with quotes runs no shell command" || bad "-o with quotes" "PWNED was created"
if [ "$rc" -eq 0 ] && [ -x "$tmp/sh/$evil" ] && "$tmp/sh/$evil" --random-inputs >/dev/null 2>&1; then
  ok "-o with quotes: the executable has that name and runs"
else
  bad "-o with quotes: executable" "exit $rc: $(head -c 300 "$tmp/err")"
fi
(cd "$tmp/sh" && timeout 300 "$P" compile "$SRC/models/mlp/model.onnx" -o -m >/dev/null 2>"$tmp/err")
[ -x "$tmp/sh/-m" ] && ok "-o -m: a file named -m, not a cc option" || bad "-o -m" "$(head -c 300 "$tmp/err")"
# a failed link is an error naming the command; so is a compiler that cannot be started
expect_exit 1 "failed link exits 1" env CC=false "$P" compile models/mlp/model.onnx -o "$tmp/y"
grep -q '^primc: error: linking failed (exit 1): false ' "$tmp/err" && ok "failed link: error names the command" ||
  bad "failed link message" "$(cat "$tmp/err")"
expect_exit 1 "missing cc exits 1" env CC=/nonexistent/cc "$P" compile models/mlp/model.onnx -o "$tmp/y"
grep -q 'cannot run /nonexistent/cc' "$tmp/err" && ok "missing cc: error names it" || bad "missing cc message" "$(cat "$tmp/err")"
# no library code or tool calls a shell
hits=$(grep -nE '\b(system|popen)\(' ir/*.c frontend/*.c passes/*.c codegen/*.c runtime/*.c tools/*.c 2>/dev/null)
[ -z "$hits" ] && ok "no system() or popen() outside the tests" || bad "system/popen calls" "$hits"

echo "hardening: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
