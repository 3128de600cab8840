#!/usr/bin/env python3
# bench/gpu_prof.py: where a CUDA executable's time goes, kernel by kernel, read by Nsight Compute (ncu) from one
# run on the stream (no CUDA graph): each kernel's GPU duration summed over its launches, the heaviest first.
# Usage: python3 bench/gpu_prof.py PRIMC MODEL.onnx INPUT.npy [TOP] [-- PRIMC_COMPILE_FLAGS...]
import csv
import io
import os
import shutil
import subprocess
import sys
import tempfile
from collections import defaultdict


def ncu_path():
    return shutil.which("ncu") or next((p for p in ["/usr/local/cuda/bin/ncu"] if os.path.exists(p)), None)


def main():
    argv = sys.argv[1:]
    flags = argv[argv.index("--") + 1:] if "--" in argv else []
    argv = argv[:argv.index("--")] if "--" in argv else argv
    primc, model, inp = argv[:3]
    top = int(argv[3]) if len(argv) > 3 else 25
    ncu = ncu_path()
    if not ncu:
        sys.exit("gpu_prof: no ncu on this machine")
    with tempfile.TemporaryDirectory() as d:
        exe = os.path.join(d, "m")
        c = subprocess.run([primc, "compile", model, "--target", "cuda", "-o", exe] + flags, capture_output=True,
                           text=True)
        if c.returncode:
            sys.exit(f"primc compile: {c.stderr[-400:]}")
        r = subprocess.run([ncu, "--clock-control", "none", "--metrics", "gpu__time_duration.sum", "--csv",
                            "--print-units", "base", exe, inp, "-o", os.path.join(d, "out"), "--no-cuda-graphs"],
                           capture_output=True, text=True)
    rows = [ln for ln in r.stdout.splitlines() if ln.startswith('"')]
    if r.returncode or not rows:
        sys.exit(f"ncu: exit {r.returncode}: {r.stdout[-600:]} {r.stderr[-600:]}")
    by = defaultdict(lambda: [0, 0.0, ""])
    for row in csv.DictReader(io.StringIO("\n".join(rows))):
        if row.get("Metric Name") != "gpu__time_duration.sum":
            continue
        k = by[row["Kernel Name"]]
        k[0] += 1
        k[1] += float(row["Metric Value"].replace(",", ""))
        k[2] = f"grid {row.get('Grid Size', '?')} block {row.get('Block Size', '?')}"
    total = sum(v[1] for v in by.values())
    print(f"{os.path.basename(os.path.dirname(model))} {' '.join(flags)}: {sum(v[0] for v in by.values())} launches, "
          f"{len(by)} kernels, {total / 1e3:.1f} us of kernel time")
    for name, (n, ns, shape) in sorted(by.items(), key=lambda kv: -kv[1][1])[:top]:
        print(f"{ns / 1e3:9.1f} us {100 * ns / total:5.1f}%  x{n:<3} {name[:60]:60s} {shape}")


if __name__ == "__main__":
    main()
