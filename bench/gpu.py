#!/usr/bin/env python3
# bench/gpu.py: the zoo on a CUDA GPU: primc --target cuda (stream and CUDA graph) against PyTorch eager and
# torch.compile on the same GPU, same model and input, each output checked against ONNX Runtime on the CPU.
# Usage: python3 bench/gpu.py PRIMC RUNS OUT.md [--tf32 | --bf16] [--batch N] [--no-compile] [--direct] [--also ENV=VAL]
#                     [--work DIR [--export-only]] [NAME ...]
#   (needs torch with CUDA, onnxruntime, a GPU). --tf32: primc --matmul-precision high and PyTorch's TF32 switches
#   on (cuBLAS and cuDNN), outputs checked to 1e-2 of max |ref| instead of 1e-4. --bf16: primc --autocast bf16 (bf16
#   tensor cores) against PyTorch under torch.autocast("cuda", bfloat16), outputs checked to 3e-2 of max |ref|.
#   --also ENV=VAL: also primc compiled with that variable set (a kernel variant to compare: PRIMC_CUDA_ATTN=dims the
#   attention kernel before, PRIMC_CUDA_GEMM=ROW a forced tile row), timed in the same run; --direct is
#   --also PRIMC_CUDA_GEMM=direct (the dot and conv kernels before the tiled GEMMs). --work DIR: export into DIR and reuse what an earlier run (or --export-only) left there.
import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np
import onnxruntime as ort
import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "models"))
import export  # noqa: E402  (the zoo's constructors and input makers)


def primc_times(exe, inp, runs, graphs, outdir):
    cmd = [exe, inp, "-o", outdir, "--bench", str(runs)] + ([] if graphs else ["--no-cuda-graphs"])
    r = subprocess.run(cmd, capture_output=True, text=True)
    m = re.search(r"min ([0-9.]+) ms, median ([0-9.]+) ms", r.stdout)
    if r.returncode or not m:
        raise RuntimeError(f"{' '.join(cmd)}: {r.stdout[-300:]} {r.stderr[-300:]}")
    return float(m.group(1)), float(m.group(2))


def torch_times(fn, x, runs):
    """min / median ms of fn(x) on the GPU, timed with CUDA events after warm-up"""
    with torch.no_grad():
        for _ in range(5):
            fn(x)
        torch.cuda.synchronize()
        ts = []
        for _ in range(runs):
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record()
            fn(x)
            b.record()
            b.synchronize()
            ts.append(a.elapsed_time(b))
    return min(ts), statistics.median(ts)


def autocast_bf16(fn):
    """fn under torch.autocast's bf16 policy, as primc --autocast bf16 runs the model"""
    def run(x):
        with torch.autocast("cuda", dtype=torch.bfloat16):
            return fn(x)
    return run


def compile_cuda(primc, model, exe, flags, env=None):
    c = subprocess.run([primc, "compile", model, "--target", "cuda", "-o", exe] + flags, capture_output=True, text=True,
                       env={**os.environ, **(env or {})})
    if c.returncode:
        raise RuntimeError(f"primc compile {' '.join(flags)} {env or ''}: {c.stderr[-400:]}")


def bench_model(name, primc, runs, work, args):
    ctor, make_input, _ = export.MODELS[name]
    d = os.path.join(work, f"{name}_b{args.batch}")
    if not os.path.exists(os.path.join(d, "input.npy")):  # --work may hold it from an earlier run or --export-only
        export.export(name, d, args.batch)  # seeds torch itself: the same weights as the ONNX file
    inp = os.path.join(d, "input.npy")
    x_np = np.load(inp)
    sess = ort.InferenceSession(os.path.join(d, "model.onnx"), providers=["CPUExecutionProvider"])
    ref = sess.run(None, {sess.get_inputs()[0].name: x_np})[0]
    exe = os.path.join(d, "m")
    t0 = time.time()
    flags = ["--matmul-precision", "high"] if args.tf32 else ["--autocast", "bf16"] if args.bf16 else []
    compile_cuda(primc, os.path.join(d, "model.onnx"), exe, flags)
    compile_s = time.time() - t0
    also = []
    for i, kv in enumerate(args.also):
        k, v = kv.split("=", 1)
        compile_cuda(primc, os.path.join(d, "model.onnx"), f"{exe}_v{i}", flags, {k: v})
        also.append(primc_times(f"{exe}_v{i}", inp, runs, True, os.path.join(d, f"out_v{i}")))
    stream = primc_times(exe, inp, runs, False, os.path.join(d, "out"))
    got = np.load(os.path.join(d, "out", "out0.npy"))
    err = float(np.max(np.abs(got.astype(np.float64) - ref)) / max(1e-30, float(np.max(np.abs(ref)))))
    graph = primc_times(exe, inp, runs, True, os.path.join(d, "out_g"))
    torch.manual_seed(0)
    model = ctor().eval().cuda()
    x = torch.from_numpy(x_np).cuda()
    wrap = autocast_bf16 if args.bf16 else (lambda fn: fn)
    eager = torch_times(wrap(model), x, runs)
    compiled = None
    if args.compile:
        try:
            compiled = torch_times(wrap(torch.compile(model)), x, runs)
        except Exception as e:  # reported as missing, not faked
            print(f"{name}: torch.compile failed: {e}", file=sys.stderr)
    return dict(name=name, stream=stream, graph=graph, eager=eager, compiled=compiled, err=err, compile_s=compile_s,
                also=also)


def fmt(t):
    return "-" if t is None else f"{t[0]:.3f} / {t[1]:.3f}"


def ratio(a, b):
    return "-" if b is None else f"{a[1] / b[1]:.2f}"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("primc")
    ap.add_argument("runs", type=int)
    ap.add_argument("out_md")
    ap.add_argument("names", nargs="*")
    prec = ap.add_mutually_exclusive_group()
    prec.add_argument("--tf32", action="store_true")
    prec.add_argument("--bf16", action="store_true", help="primc --autocast bf16 against torch.autocast bf16")
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--no-compile", dest="compile", action="store_false", help="leave torch.compile out")
    ap.add_argument("--direct", action="store_true", help="also time primc's kernels before the tiled GEMMs")
    ap.add_argument("--also", action="append", default=[], metavar="ENV=VAL",
                    help="also time primc compiled with ENV=VAL (repeatable)")
    ap.add_argument("--work", help="the exported models' folder, kept and reused (default: a temporary one)")
    ap.add_argument("--export-only", action="store_true", help="export the models into --work and stop")
    args = ap.parse_intermixed_args()  # names may follow the flags
    primc = os.path.abspath(args.primc)
    if args.direct:
        args.also.insert(0, "PRIMC_CUDA_GEMM=direct")
    names = args.names or [n for n, (_, _, tier) in export.MODELS.items() if tier != "extended"]
    torch.backends.cudnn.allow_tf32 = args.tf32
    torch.backends.cuda.matmul.allow_tf32 = args.tf32
    tol = 1e-2 if args.tf32 else 3e-2 if args.bf16 else 1e-4
    rows = []
    if args.export_only:
        if not args.work:
            sys.exit("--export-only needs --work DIR")
        for n in names:
            export.export(n, os.path.join(args.work, f"{n}_b{args.batch}"), args.batch)
        return
    with tempfile.TemporaryDirectory() as tmp:
        work = args.work or tmp
        for n in names:
            try:
                r = bench_model(n, primc, args.runs, work, args)
            except Exception as e:
                print(f"{n}: FAILED: {e}", flush=True)
                continue
            rows.append(r)
            variants = " ".join(f"{a} graph {fmt(t)}" for a, t in zip(args.also, r["also"]))
            print(f"{n}: primc {fmt(r['stream'])} graph {fmt(r['graph'])} {variants} "
                  f"eager {fmt(r['eager'])} compile {fmt(r['compiled'])} ms, rel err {r['err']:.1e}", flush=True)
    gpu = torch.cuda.get_device_name()
    prec = ("TF32 (primc --matmul-precision high; PyTorch allow_tf32 in cuBLAS and cuDNN)" if args.tf32 else
            "bf16 (primc --autocast bf16; PyTorch torch.autocast bfloat16)" if args.bf16 else "fp32 (TF32 off)")
    lines = [f"GPU: {gpu}, torch {torch.__version__}, onnxruntime {ort.__version__} (CPU, the reference), "
             f"{time.strftime('%Y-%m-%d')}; batch {args.batch}, {prec}; min / median ms of {args.runs} runs after "
             "warm-up; ratios = primc CUDA-graph median / PyTorch median", "",
             "| model | primc (stream) | primc (CUDA graph) | " + "".join(f"primc {a} (CUDA graph) | " for a in args.also) +
             "PyTorch eager "
             "| torch.compile | vs eager | vs compile | max err / max ref |",
             "| --- " * (8 + len(args.also)) + "|"]
    for r in rows:
        lines.append(f"| {r['name']} | {fmt(r['stream'])} | {fmt(r['graph'])} | " + "".join(f"{fmt(t)} | " for t in r["also"]) +
                     f"{fmt(r['eager'])} "
                     f"| {fmt(r['compiled'])} | {ratio(r['graph'], r['eager'])} | {ratio(r['graph'], r['compiled'])} "
                     f"| {r['err']:.1e} |")
    open(args.out_md, "w").write("\n".join(lines) + "\n")
    print("\n".join(lines))
    bad = [r["name"] for r in rows if not r["err"] <= tol]
    if bad or len(rows) != len(names):
        sys.exit(f"not matching ONNX Runtime or failed: {bad or 'see above'}")


if __name__ == "__main__":
    main()
