#!/usr/bin/env bash
# tests/suites/determinism.sh: the determinism promise (README, "Determinism"): a compiled model's outputs are
# bitwise identical from run to run and at 1, 2 and 4 threads (PRIMC_NUM_THREADS). Every bundled model is compiled
# once (-O2, fused) and run on its input.npy twice at 1 thread and once at 2 and at 4; every output file of every run
# must equal the first run's byte for byte.
set -u
B=${B:-build}
. tests/suite_lib.sh

for d in models/*/; do
  [ -f "$d/model.onnx" ] || continue
  name=$(basename "$d")
  exe=$tmp/$name.exe
  if ! "$B/primc" compile "$d/model.onnx" -O2 -o "$exe" >"$tmp/$name.log" 2>&1; then
    echo "FAIL $name: compile: $(tail -n 2 "$tmp/$name.log")"
    fail=$((fail + 1))
    continue
  fi
  why=""
  for run in t1a t1b t2 t4; do
    n=${run#t}
    n=${n%[ab]}
    if ! PRIMC_NUM_THREADS=$n "$exe" "$d/input.npy" -o "$tmp/$name-$run" >"$tmp/$name-$run.log" 2>&1; then
      why="run at $n threads exited non-zero: $(tail -n 2 "$tmp/$name-$run.log")"
      break
    fi
  done
  if [ -z "$why" ]; then
    outs=$(cd "$tmp/$name-t1a" 2>/dev/null && ls ./*.npy 2>/dev/null)
    [ -n "$outs" ] || why="the first run wrote no .npy output"
    for run in t1b t2 t4; do
      [ -z "$why" ] || break
      [ "$(cd "$tmp/$name-$run" && ls ./*.npy 2>/dev/null)" = "$outs" ] || why="$run wrote other output files"
      for o in $outs; do
        cmp -s "$tmp/$name-t1a/$o" "$tmp/$name-$run/$o" || { why="$o differs between t1a and $run"; break; }
      done
    done
  fi
  if [ -z "$why" ]; then
    echo "PASS $name: $(echo $outs | wc -w) outputs bitwise identical over 2 runs at 1 thread and runs at 2 and 4"
    pass=$((pass + 1))
  else
    echo "FAIL $name: $why"
    fail=$((fail + 1))
  fi
done
suite_end determinism
