#!/usr/bin/env python3
# bench/gpu_rows.py: every CUDA GEMM tile row of a precision forced (PRIMC_CUDA_GEMM=ROW) on MatMuls of the given
# shapes, beside the row primc picks and the kernels before the tiled GEMMs, to check the picker's wave model against
# the GPU. Time: the executable's --bench median (a CUDA graph of one kernel, so launch cost included).
# Usage: python3 bench/gpu_rows.py PRIMC PRECISION MxNxK...   (PRECISION: high = TF32 rows, medium = bf16 rows,
#   highest = SIMT rows)
import os
import re
import subprocess
import sys
import tempfile

import onnx
from onnx import TensorProto, helper

ROWS = {"highest": "simt", "high": "tf32", "medium": "bf16"}
SIZES = ["128x128", "64x64", "32x32"]
# rows and dot splits primc runs only when forced, to be timed
CANDIDATES = {"highest": ["simt_64x64_cp4", "simt_32x32_cp4"], "high": ["tf32_32x32:2", "tf32_32x32:4", "tf32_64x64:4"]}


def model(path, m, n, k):
    a = helper.make_tensor_value_info("a", TensorProto.FLOAT, [m, k])
    b = helper.make_tensor_value_info("b", TensorProto.FLOAT, [k, n])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [m, n])
    g = helper.make_graph([helper.make_node("MatMul", ["a", "b"], ["y"])], "mm", [a, b], [y])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), path)


def time_us(primc, onnx_path, exe, prec, force):
    env = {**os.environ, "PRIMC_CUDA_GEMM": force} if force else dict(os.environ)
    c = subprocess.run([primc, "compile", onnx_path, "--target", "cuda", "-o", exe, "--matmul-precision", prec],
                       capture_output=True, text=True, env=env)
    if c.returncode:
        return None
    r = subprocess.run([exe, "--random-inputs", "--bench", "30", "--cuda-graphs"], capture_output=True, text=True)
    m = re.search(r"median ([0-9.]+) ms", r.stdout)
    return float(m.group(1)) * 1e3 if m and not r.returncode else None


def picked(primc, onnx_path, out, prec):
    subprocess.run([primc, "compile", onnx_path, "--target", "cuda", "--emit", "cuda", "-o", out, "--matmul-precision",
                    prec], capture_output=True)
    m = re.search(r"/\* gemm (\S+) .*split (\d+)", open(out).read()) if os.path.exists(out) else None
    return f"{m.group(1)}:{m.group(2)}" if m else "?"


def main():
    primc, prec, shapes = os.path.abspath(sys.argv[1]), sys.argv[2], sys.argv[3:]
    forces = ["", "direct"] + [f"{ROWS[prec]}_{s}" for s in SIZES] + CANDIDATES.get(prec, [])
    print(f"--matmul-precision {prec}: median us (TFLOP/s); 'picked' is primc's own choice")
    print("| M x N x K | " + " | ".join(f or "picked" for f in forces) + " |")
    print("| --- |" + " --- |" * len(forces))
    with tempfile.TemporaryDirectory() as d:
        for s in shapes:
            m, n, k = (int(v) for v in s.split("x"))
            path = os.path.join(d, f"mm_{s}.onnx")
            model(path, m, n, k)
            cells = []
            for f in forces:
                t = time_us(primc, path, os.path.join(d, f"mm_{s}_{f or 'picked'}"), prec, f)
                cells.append("-" if t is None else f"{t:.1f} ({2.0 * m * n * k / t / 1e6:.1f})")
            cells[0] += " " + picked(primc, path, os.path.join(d, f"mm_{s}.cu"), prec)
            print(f"| {s} | " + " | ".join(cells) + " |", flush=True)


if __name__ == "__main__":
    main()
