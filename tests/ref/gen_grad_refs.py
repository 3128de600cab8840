#!/usr/bin/python3
# tests/ref/gen_grad_refs.py: PyTorch autograd references for `primc compile --grad` on the bundled models.
# Each model's ONNX graph is evaluated node by node with torch ops (float64), a seeded random cotangent is
# pulled back by torch.autograd, and models/NAME/grad.npz gets the cotangents (ct0, ...) and the gradients
# (g0, ...) in primc's order: every float graph input, then every float initializer in file order (zeros
# where torch has none: an initializer the graph reads only as a constant, such as Resize's scales); and for
# forward mode (`--jvp`) a random tangent per float input (t0, ...) and the outputs' tangents (jt0, ...) from
# torch.autograd.functional.jvp.
# Run with Debian's /usr/bin/python3 (python3-torch, python3-onnx: `tools/setup.sh models`).
# Usage: /usr/bin/python3 tests/ref/gen_grad_refs.py [NAME ...]
import os
import sys

import numpy as np
import onnx
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from onnx_torch import FLOAT, evaluate, load_params  # noqa: E402

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
MODELS = ["mlp", "resnet_tiny", "encoder_tiny", "gpt_block_tiny", "lstm", "yolo_tiny"]

def main():
    names = sys.argv[1:] or MODELS
    for name in names:
        d = os.path.join(ROOT, "models", name)
        m = onnx.load(os.path.join(d, "model.onnx"))
        env, params = load_params(m)
        inits = set(env)
        x = np.load(os.path.join(d, "input.npy"))
        wrt = []
        for inp in m.graph.input:
            if inp.name in inits:
                continue
            t = torch.tensor(x)
            if t.is_floating_point():
                t = t.to(FLOAT).requires_grad_()
                wrt.append(t)
            env[inp.name] = t
        wrt += [t for _, t in params]
        ys = evaluate(m, env)
        rng = np.random.default_rng(0)
        cts = [rng.standard_normal(tuple(y.shape)).astype(np.float32) for y in ys]
        loss = sum((y * torch.tensor(c, dtype=FLOAT)).sum() for y, c in zip(ys, cts))
        grads = torch.autograd.grad(loss, wrt, allow_unused=True)
        out = {f"ct{i}": c for i, c in enumerate(cts)}
        for i, (w, gr) in enumerate(zip(wrt, grads)):
            out[f"g{i}"] = (gr if gr is not None else torch.zeros_like(w)).detach().numpy().astype(np.float32)
        # forward mode: a random tangent of each float input, the outputs' tangents (weights held fixed)
        xs = [env[i.name] for i in m.graph.input if i.name not in inits and env[i.name].is_floating_point()]
        if xs:
            ts = [torch.tensor(rng.standard_normal(tuple(v.shape)).astype(np.float32)).to(FLOAT) for v in xs]
            names = [i.name for i in m.graph.input if i.name not in inits and env[i.name].is_floating_point()]

            def f(*vals):
                return tuple(evaluate(m, {**env, **dict(zip(names, vals))}))
            _, tan = torch.autograd.functional.jvp(f, tuple(v.detach() for v in xs), tuple(ts))
            for i, t in enumerate(ts):
                out[f"t{i}"] = t.numpy().astype(np.float32)
            for j, t in enumerate(tan):
                out[f"jt{j}"] = t.detach().numpy().astype(np.float32)
        y_ref = np.load(os.path.join(d, "expected.npy"))
        err = np.abs(ys[0].detach().numpy() - y_ref).max()
        assert err < 1e-4, f"{name}: the torch evaluation is off the model's expected output by {err}"
        np.savez_compressed(os.path.join(d, "grad.npz"), **out)
        print(f"{name}: {len(wrt)} gradients, forward within {err:.2g} of expected.npy")


if __name__ == "__main__":
    main()
