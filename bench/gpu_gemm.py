#!/usr/bin/env python3
# bench/gpu_gemm.py: one square f32 MatMul (N x N x N) compiled by primc for CUDA, fp32 (SIMT) and TF32 (tensor
# cores, --matmul-precision high), against torch.mm (cuBLAS) with TF32 off and on, on the same GPU in one run.
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


def primc_ms(primc, model, exe, tf32):
    c = subprocess.run([primc, "compile", model, "--target", "cuda", "-o", exe] +
                       (["--matmul-precision", "high"] if tf32 else []), capture_output=True, text=True)
    if c.returncode:
        raise RuntimeError(c.stderr[-400:])
    r = subprocess.run([exe, "--random-inputs", "--bench", str(RUNS), "--cuda-graphs"], capture_output=True, text=True)
    m = re.search(r"min ([0-9.]+) ms, median ([0-9.]+) ms", r.stdout)
    if r.returncode or not m:
        raise RuntimeError(f"{r.stdout[-300:]} {r.stderr[-300:]}")
    return float(m.group(2))


def torch_ms(n, tf32):
    torch.backends.cuda.matmul.allow_tf32 = tf32
    a, b = torch.randn(n, n, device="cuda"), torch.randn(n, n, device="cuda")
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
            for tf32 in (False, True):
                p = primc_ms(primc, model, os.path.join(d, f"mm{n}_{int(tf32)}"), tf32)
                t = torch_ms(n, tf32)
                fl = 2.0 * n ** 3 / 1e9
                print(f"| {n} | {'TF32' if tf32 else 'fp32'} | {p:.3f} | {t:.3f} | {fl / p:.1f} | {fl / t:.1f} | {t / p:.2f} |",
                      flush=True)


if __name__ == "__main__":
    main()
