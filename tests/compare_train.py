#!/usr/bin/env python3
# tests/compare_train.py: one case of tests/data/train/ (tests/ref/gen_train_refs.py): the model compiled with
# `primc compile --train` and the case's options, run for the case's steps on its dataset, the loss of every
# step and the saved weights (safetensors) against PyTorch's: each loss within 1e-4 relative, each weight
# within rtol 1e-4 plus 1e-4 of its scale (its largest |value|, at least 1% of the largest weight).
# Usage: compare_train.py PRIMC CASE.npz TMPDIR [MODEL.onnx COMPILE_ARG ... [--run RUN_ARG ...]]  (the case's model,
# or MODEL.onnx in its place, compiled with the args given besides the case's, a batch dim as a range, --dim
# N=1..8; the executable run with RUN_ARGs besides, --batch 4, or --epochs E in place of the case's steps)
import json
import os
import subprocess
import sys

import numpy as np


def read_safetensors(path):
    with open(path, "rb") as f:
        raw = f.read()
    n = int.from_bytes(raw[:8], "little")
    hdr = json.loads(raw[8:8 + n])
    body = raw[8 + n:]
    kinds = {"F32": np.float32, "F64": np.float64}
    return {k: np.frombuffer(body[v["data_offsets"][0]:v["data_offsets"][1]], dtype=kinds[v["dtype"]]).reshape(v["shape"])
            for k, v in hdr.items() if k != "__metadata__"}


def main():
    primc, case, tmp = sys.argv[1], sys.argv[2], sys.argv[3]
    ref = np.load(case)
    model, *opts = open(case[:-4] + ".txt").read().split()
    steps = opts.pop()
    np.save(os.path.join(tmp, "x.npy"), ref["x"])
    np.save(os.path.join(tmp, "y.npy"), ref["y"])
    exe, saved = os.path.join(tmp, "train"), os.path.join(tmp, "w.safetensors")
    path = sys.argv[4] if len(sys.argv) > 4 else f"models/{model}/model.onnx"
    extra = sys.argv[5:]
    at = extra.index("--run") if "--run" in extra else len(extra)
    subprocess.run([primc, "compile", path, "--train", *opts, *extra[:at], "-o", exe], check=True)
    run_args = extra[at + 1:]
    if "--epochs" not in run_args:  # else the epochs make the case's steps
        run_args = ["--steps", steps, *run_args]
    run = subprocess.run([exe, os.path.join(tmp, "x.npy"), os.path.join(tmp, "y.npy"), "--save", saved, *run_args],
                         check=True, capture_output=True, text=True)
    losses = [float(line.split()[3]) for line in run.stdout.splitlines() if line.startswith("step ")]
    bad = []
    if len(losses) != len(ref["losses"]):
        bad.append(f"{len(losses)} losses printed, {len(ref['losses'])} expected")
    for i, (a, b) in enumerate(zip(losses, ref["losses"])):
        if abs(a - b) > 1e-4 * abs(b):
            bad.append(f"step {i + 1}: loss {a:.7g}, torch {b:.7g}")
    got = read_safetensors(saved)
    want = {k[2:]: ref[k] for k in ref.files if k.startswith("w:")}
    if sorted(got) != sorted(want):
        bad.append(f"saved weights {sorted(got)}, expected {sorted(want)}")
    floor = 1e-2 * max(float(np.abs(w).max()) for w in want.values())
    worst = 0.0
    for k, w in want.items():
        if k not in got:
            continue
        g = got[k].astype(np.float64)
        scale = max(float(np.abs(w).max()), floor)
        err = float((np.abs(g - w) - 1e-4 * np.abs(w)).max())
        worst = max(worst, err / scale)
        if g.shape != w.shape or err > 1e-4 * scale:
            bad.append(f"{k}: off by {err:.3g} (scale {scale:.3g})")
    for b in bad:
        print(b)
    print(f"{len(losses)} steps, losses {', '.join(f'{v:.6g}' for v in losses)}; weights within {worst:.2g} of their scale")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
