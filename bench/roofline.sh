#!/usr/bin/env bash
# bench/roofline.sh: primc's GEMM against OpenBLAS sgemm and the machine's FMA peak, and a fused elementwise
# kernel's bandwidth against a STREAM triad, all measured in this run (called by `make bench`).
set -eu
B=${B:-build}
out=bench/roofline.md
{
  echo "# roofline, $(date +%Y-%m-%d), $(nproc) cores, $(lscpu | sed -n 's/^Model name: *//p')"
  echo
  for t in 1 2; do PRIMC_NUM_THREADS=$t "$B/gemm_bench" --quick; done
  echo "## fused elementwise kernel against a STREAM triad (2^24 floats, 3 arrays, 201 MB per run)"
  echo
  "$B/stream" 2 | sed 's/^/    /'
  "$B/primc" bench bench/triad.txt --threads 1,2 --runs 10 2>/dev/null |
    awk -F'|' '/^[0-9]+ threads?:/ { t = $0; sub(/ .*/, "", t) }
      /^\| fused -O2/ { printf "    primc fused triad kernel, %d thread(s): %.3f ms median, %.1f GB/s\n", t, $4, 201.326592 / $4 }
      /^\| k0 / { printf "    the same kernel under the per-kernel profiler (1 thread): %.1f GB/s\n", $6 }'
} | tee "$out"
