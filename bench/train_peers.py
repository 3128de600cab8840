#!/usr/bin/env python3
# bench/train_peers.py: a training step compiled by `primc compile --train` against the same step in PyTorch eager
# (and torch.compile where the installed torch has it), interleaved rounds on this machine, same threads.
# Models from models/export.py at batch 8: ResNet-tiny (cross-entropy, SGD with momentum) and a BERT-style encoder
# of 4 layers, width 256, seq 128 (MSE against a random target, AdamW). primc's time per step is the
# executable's own (`--steps N` prints it; cutting each batch from the dataset included).
# Usage: python3 bench/train_peers.py [--threads 1,2] [--rounds 3] [--steps 20] [--primc build/primc]
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


def cases():
    torch.manual_seed(0)
    rn = export.ResNetTiny().eval()  # BatchNorm on its running statistics: the ONNX export folds it so
    x = torch.randn(8, 3, 64, 64)
    y = torch.randint(0, 10, (8,))
    enc = export.Encoder(8000, 256, 4, 4, 1024, 128).eval()
    ids = torch.randint(0, 8000, (8, 128))
    target = torch.randn(8, 128, 256)
    return [
        ("resnet_tiny b8", rn, x, y, "cross_entropy", "momentum", lambda p: torch.optim.SGD(p, lr=0.01, momentum=0.9)),
        ("encoder 4x256 b8 s128", enc, ids, target, "mse", "adamw", lambda p: torch.optim.AdamW(p, lr=1e-3)),
    ]


def torch_step_ms(model, x, y, loss_kind, make_opt, steps, step_fn=None):
    opt = make_opt(model.parameters())
    loss_fn = torch.nn.functional.cross_entropy if loss_kind == "cross_entropy" else torch.nn.functional.mse_loss

    def step():
        loss = loss_fn(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    fn = step_fn(step) if step_fn else step
    for _ in range(3):
        fn()
    ts = []
    for _ in range(steps):
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    return 1e3 * sorted(ts)[len(ts) // 2]


def primc_step_ms(exe, data, steps, threads):
    env = dict(os.environ, PRIMC_NUM_THREADS=str(threads))
    out = subprocess.run([exe, *data, "--steps", str(steps), "--log-every", str(steps)], env=env, check=True,
                         capture_output=True, text=True).stdout
    return float(re.search(r"([0-9.]+) ms per step", out).group(1))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--primc", default=os.path.join(HERE, "..", "build", "primc"))
    a = ap.parse_args()
    cpu = next((line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name")), "?")
    print(f"# training step, ms (median per step); {cpu}, {platform.machine()}, torch {torch.__version__}")
    tmp = tempfile.mkdtemp(prefix="primc-train-")
    has_compile = hasattr(torch, "compile")
    for name, model, x, y, loss, opt, make_opt in cases():
        d = os.path.join(tmp, name.split()[0])
        os.makedirs(d, exist_ok=True)
        onnx_path = os.path.join(d, "model.onnx")
        # torch 2.9+ defaults to the torch.export-based exporter (it needs onnxscript): the TorchScript one, as 1.13's
        legacy = {"dynamo": False} if "dynamo" in inspect.signature(torch.onnx.export).parameters else {}
        torch.onnx.export(model, (x,), onnx_path, opset_version=14, input_names=["input"], output_names=["output"],
                          **legacy)
        np.save(os.path.join(d, "x.npy"), x.numpy())
        np.save(os.path.join(d, "y.npy"), y.numpy())
        exe = os.path.join(d, "train")
        lr = "0.01" if opt == "momentum" else "0.001"
        subprocess.run([a.primc, "compile", onnx_path, "--train", "--loss", loss, "--optimizer", opt, "--lr", lr,
                        "-o", exe, "--quiet"], check=True)
        data = [os.path.join(d, "x.npy"), os.path.join(d, "y.npy")]
        for threads in [int(t) for t in a.threads.split(",")]:
            torch.set_num_threads(threads)
            rows = {"primc": [], "eager": [], "compile": []}
            for _ in range(a.rounds):
                rows["primc"].append(primc_step_ms(exe, data, a.steps, threads))
                rows["eager"].append(torch_step_ms(model, x, y, loss, make_opt, a.steps))
                if has_compile:
                    rows["compile"].append(torch_step_ms(model, x, y, loss, make_opt, a.steps, torch.compile))
            med = {k: sorted(v)[len(v) // 2] for k, v in rows.items() if v}
            line = f"{name}, {threads} thread{'s' if threads > 1 else ''}: primc {med['primc']:.2f}, eager {med['eager']:.2f}"
            line += f" (primc/eager {med['primc'] / med['eager']:.2f})"
            if "compile" in med:
                line += f", torch.compile {med['compile']:.2f} (primc/compile {med['primc'] / med['compile']:.2f})"
            print(line, flush=True)


if __name__ == "__main__":
    main()
