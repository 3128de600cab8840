#!/usr/bin/env python3
# bench/gpu_gemm.py: one square f32 MatMul (N x N x N) compiled by primc for CUDA, fp32 (SIMT), TF32 (tensor
# cores, --matmul-precision high) and bf16 (tensor cores, --matmul-precision medium: f32 operands rounded to bf16 as
# they are staged, f32 out), against torch.mm (cuBLAS) with TF32 off, on, and on bf16 tensors (bf16 in and out, so
# it reads half the bytes primc does), on the same GPU in one run.
# primc's time is its executable's --bench (a CUDA graph); PyTorch's, CUDA events around torch.mm.
# Usage: python3 bench/gpu_gemm.py PRIMC [N ...]   (default N: 4096 1024)
import os
import re
import statistics
import subprocess
import sys
import tempfile

import onnx
import torch
from onnx import TensorProto, helper

RUNS = 20


def matmul_model(path, n):
    a = helper.make_tensor_value_info("a", TensorProto.FLOAT, [n, n])
    b = helper.make_tensor_value_info("b", TensorProto.FLOAT, [n, n])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [n, n])
    g = helper.make_graph([helper.make_node("MatMul", ["a", "b"], ["y"])], "mm", [a, b], [y])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), path)


PRECISIONS = {"fp32": "highest", "TF32": "high", "bf16": "medium"}  # the table's name: primc's --matmul-precision


def primc_ms(primc, model, exe, prec):
    c = subprocess.run([primc, "compile", model, "--target", "cuda", "-o", exe, "--matmul-precision", PRECISIONS[prec]],
                       capture_output=True, text=True)
    if c.returncode:
        raise RuntimeError(c.stderr[-400:])
    r = subprocess.run([exe, "--random-inputs", "--bench", str(RUNS), "--cuda-graphs"], capture_output=True, text=True)
    m = re.search(r"min ([0-9.]+) ms, median ([0-9.]+) ms", r.stdout)
    if r.returncode or not m:
        raise RuntimeError(f"{r.stdout[-300:]} {r.stderr[-300:]}")
    return float(m.group(2))


def torch_ms(n, prec):
    torch.backends.cuda.matmul.allow_tf32 = prec == "TF32"
    dt = torch.bfloat16 if prec == "bf16" else torch.float32
    a, b = torch.randn(n, n, device="cuda", dtype=dt), torch.randn(n, n, device="cuda", dtype=dt)
    for _ in range(3):
        torch.mm(a, b)
    torch.cuda.synchronize()
    ts = []
    for _ in range(RUNS):
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        e0.record()
        torch.mm(a, b)
        e1.record()
        e1.synchronize()
        ts.append(e0.elapsed_time(e1))
    return statistics.median(ts)


def main():
    primc = os.path.abspath(sys.argv[1])
    sizes = [int(s) for s in sys.argv[2:]] or [4096, 1024]
    print(f"GPU: {torch.cuda.get_device_name()}, torch {torch.__version__}; median ms of {RUNS}; TFLOP/s = 2 N^3 / time")
    print("| N | precision | primc ms | cuBLAS ms | primc TFLOP/s | cuBLAS TFLOP/s | primc / cuBLAS throughput |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    with tempfile.TemporaryDirectory() as d:
        for n in sizes:
            model = os.path.join(d, f"mm{n}.onnx")
            matmul_model(model, n)
            for prec in PRECISIONS:
                p = primc_ms(primc, model, os.path.join(d, f"mm{n}_{prec}"), prec)
                t = torch_ms(n, prec)
                fl = 2.0 * n ** 3 / 1e9
                print(f"| {n} | {prec} | {p:.3f} | {t:.3f} | {fl / p:.1f} | {fl / t:.1f} | {t / p:.2f} |", flush=True)


if __name__ == "__main__":
    main()
