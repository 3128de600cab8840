#!/usr/bin/env python3
# bench/train_peers.py: a training step compiled by `primc compile --train` against the same step in PyTorch eager
# (and torch.compile where the installed torch has it), interleaved rounds on this machine, same threads (torch's
# BLAS pool included: bench/torch_threads.py; on 2+ threads torch also runs with passive OpenMP threads, the faster
# of the two counts).
# Models from models/export.py at batch 8: ResNet-tiny (cross-entropy, SGD with momentum), torchvision's ResNet-18
# at 224x224 (the same), and a BERT-style encoder of 4 layers, width 256, seq 128 (MSE against a random target,
# AdamW). BatchNorm runs on its running statistics in both (the ONNX export folds it into the convs; torch keeps
# the op). primc's time per step is the executable's own (`--steps N` prints it; cutting each batch from the
# dataset included). Memory: primc's compiled workspace (`--report`) and the peak RSS of its process over two
# steps; torch's peak RSS over two steps less its RSS after `import torch` (weights, gradients, optimizer state and
# activations), each in a fresh process (VmHWM in /proc, not ru_maxrss, which a child inherits from its parent).
# Usage: python3 bench/train_peers.py [--threads 1,2] [--rounds 3] [--steps 20] [--models a,b] [--primc build/primc]
import argparse
import inspect
import os
import platform
import re
import subprocess
import sys
import tempfile
import time

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "models"))
import export  # noqa: E402
from torch_threads import set_threads  # noqa: E402


def _resnet_tiny():
    return (export.ResNetTiny().eval(), torch.randn(8, 3, 64, 64), torch.randint(0, 10, (8,)), "cross_entropy",
            "momentum", lambda p: torch.optim.SGD(p, lr=0.01, momentum=0.9))


def _resnet18():
    return (export.torchvision_model("resnet18").eval(), torch.randn(8, 3, 224, 224), torch.randint(0, 1000, (8,)),
            "cross_entropy", "momentum", lambda p: torch.optim.SGD(p, lr=0.01, momentum=0.9))


def _encoder():
    return (export.Encoder(8000, 256, 4, 4, 1024, 128).eval(), torch.randint(0, 8000, (8, 128)),
            torch.randn(8, 128, 256), "mse", "adamw", lambda p: torch.optim.AdamW(p, lr=1e-3))


# name -> (short name, what builds the model, its batch, labels, loss, optimizer); built one at a time
CASES = {"resnet_tiny": ("resnet_tiny b8", _resnet_tiny), "resnet18": ("resnet18 b8 224x224", _resnet18),
         "encoder": ("encoder 4x256 b8 s128", _encoder)}


def case(key):
    torch.manual_seed(0)
    name, make = CASES[key]
    return (name, *make())


def status_mb(field, pid="self"):
    """a size from /proc/PID/status in MB (VmRSS: now; VmHWM: the peak since the process's exec, which, unlike
    getrusage's ru_maxrss, a child does not inherit from the large parent it was forked from)"""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024
    return 0.0


def fresh_torch(key, threads, body, env=None):
    """the number a fresh process prints after importing this module, setting its threads, building case key as
    m, x, y, loss, mk (its optimizer's maker), noting its RSS as base, then running body"""
    code = (f"import sys; sys.path.insert(0, {HERE!r}); import train_peers as t; t.set_threads({threads}); "
            f"base = t.status_mb('VmRSS'); _, m, x, y, loss, _, mk = t.case({key!r}); {body}")
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True, env=env).stdout
    return float(out.split()[-1])


def torch_peak_mb(key, threads):
    """torch's peak RSS over two steps in a fresh process, less its RSS after import torch (MB)"""
    return fresh_torch(key, threads,
                       "t.torch_step_ms(m, x, y, loss, mk, 2, warm=0); print(t.status_mb('VmHWM') - base)")


def primc_peak_mb(exe, data, threads):
    """the peak RSS of the compiled executable over two steps (MB), its VmHWM read until it exits"""
    env = dict(os.environ, PRIMC_NUM_THREADS=str(threads))
    p = subprocess.Popen([exe, *data, "--steps", "2"], env=env, stdout=subprocess.DEVNULL)
    peak = 0.0
    while p.poll() is None:
        try:
            peak = max(peak, status_mb("VmHWM", p.pid))
        except (OSError, ValueError):
            pass
        time.sleep(0.005)
    if p.returncode:
        raise RuntimeError(f"{exe} exited {p.returncode}")
    return peak


def torch_step(model, x, y, loss_kind, make_opt, autocast=False):
    """one eager training step of model on (x, y) as a function: forward, loss, backward, the optimizer's update;
    with autocast, the forward and loss under torch.autocast bf16 (torch's mixed-precision recipe on a CPU)"""
    opt = make_opt(model.parameters())
    loss_fn = torch.nn.functional.cross_entropy if loss_kind == "cross_entropy" else torch.nn.functional.mse_loss

    def step():
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
            loss = loss_fn(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    return step


def torch_step_ms(model, x, y, loss_kind, make_opt, steps, step_fn=None, warm=3):
    step = torch_step(model, x, y, loss_kind, make_opt)
    fn = step_fn(step) if step_fn else step
    for _ in range(warm):
        fn()
    ts = []
    for _ in range(steps):
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    return 1e3 * sorted(ts)[len(ts) // 2]


def torch_passive_ms(key, threads, steps):
    """torch's step in a fresh process whose idle OpenMP threads sleep (OMP_WAIT_POLICY=PASSIVE, read when torch
    loads). Debian's torch runs its matmuls in OpenBLAS's own pool, which torch's spinning OpenMP threads starve
    on 2 cores (the encoder at 2 threads: 793-1027 ms a step spinning, 344-388 passive), while its OpenMP convs
    run as fast or faster spinning (ResNet-18: 882-1140 spinning, 1157-1172 passive): the bench takes the faster"""
    return fresh_torch(key, threads, f"print(t.torch_step_ms(m, x, y, loss, mk, {steps}))",
                       dict(os.environ, OMP_WAIT_POLICY="PASSIVE"))


def primc_step_ms(exe, data, steps, threads):
    env = dict(os.environ, PRIMC_NUM_THREADS=str(threads))
    out = subprocess.run([exe, *data, "--steps", str(steps), "--log-every", str(steps)], env=env, check=True,
                         capture_output=True, text=True).stdout
    # the median step, as torch's: the first touches the workspace's pages for the first time (torch's warm-up
    # steps are not timed)
    return float(re.search(r"ms per step, median ([0-9.]+)", out).group(1))


def compile_step(primc, d, model, x, y, loss, opt, args):
    """exports model at x's shape to d/model.onnx (and x, y as d/x.npy, d/y.npy), compiles its training step with
    primc (the output and its kind in args) and returns what primc printed"""
    os.makedirs(d, exist_ok=True)
    onnx_path = os.path.join(d, "model.onnx")
    # torch 2.9+ defaults to the torch.export-based exporter (it needs onnxscript): the TorchScript one, as 1.13's
    legacy = {"dynamo": False} if "dynamo" in inspect.signature(torch.onnx.export).parameters else {}
    torch.onnx.export(model, (x,), onnx_path, opset_version=14, input_names=["input"], output_names=["output"],
                      **legacy)
    np.save(os.path.join(d, "x.npy"), x.numpy())
    np.save(os.path.join(d, "y.npy"), y.numpy())
    lr = "0.01" if opt == "momentum" else "0.001"
    return subprocess.run([primc, "compile", onnx_path, "--train", "--loss", loss, "--optimizer", opt, "--lr", lr,
                           *args], check=True, capture_output=True, text=True).stdout


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--models", default=",".join(CASES), help="of " + ",".join(CASES))
    ap.add_argument("--primc", default=os.path.join(HERE, "..", "build", "primc"))
    a = ap.parse_args()
    cpu = next((line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name")), "?")
    print(f"# training step, ms (median per step); {cpu}, {platform.machine()}, torch {torch.__version__}")
    tmp = tempfile.mkdtemp(prefix="primc-train-")
    has_compile = hasattr(torch, "compile")
    for key in a.models.split(","):
        name, model, x, y, loss, opt, make_opt = case(key)
        d = os.path.join(tmp, name.split()[0])
        exe = os.path.join(d, "train")
        report = compile_step(a.primc, d, model, x, y, loss, opt, ["-o", exe, "--report"])
        ws = re.search(r"^workspace (\d+) bytes", report + "\n", re.M)
        data = [os.path.join(d, "x.npy"), os.path.join(d, "y.npy")]
        for threads in [int(t) for t in a.threads.split(",")]:
            set_threads(threads)
            rows = {"primc": [], "eager": [], "passive": [], "compile": []}
            for _ in range(a.rounds):
                rows["primc"].append(primc_step_ms(exe, data, a.steps, threads))
                rows["eager"].append(torch_step_ms(model, x, y, loss, make_opt, a.steps))
                if threads > 1:
                    rows["passive"].append(torch_passive_ms(key, threads, a.steps))
                if has_compile:
                    rows["compile"].append(torch_step_ms(model, x, y, loss, make_opt, a.steps, torch.compile))
            med = {k: sorted(v)[len(v) // 2] for k, v in rows.items() if v}
            spin = med["eager"]
            if med.get("passive", spin) < spin:
                med["eager"] = med["passive"]
            line = f"{name}, {threads} thread{'s' if threads > 1 else ''}: primc {med['primc']:.2f}, eager {med['eager']:.2f}"
            line += f" (primc/eager {med['primc'] / med['eager']:.2f})"
            if "passive" in med:
                line += f" [eager with spinning / passive OpenMP threads: {spin:.2f} / {med['passive']:.2f}]"
            if "compile" in med:
                line += f", torch.compile {med['compile']:.2f} (primc/compile {med['primc'] / med['compile']:.2f})"
            print(line, flush=True)
            print(f"  memory, {threads} thread{'s' if threads > 1 else ''}: primc workspace "
                  f"{int(ws.group(1)) / 2**20 if ws else float('nan'):.1f} MB, peak RSS "
                  f"{primc_peak_mb(exe, data, threads):.1f} MB; torch peak RSS over import "
                  f"{torch_peak_mb(key, threads):.1f} MB", flush=True)


if __name__ == "__main__":
    main()
