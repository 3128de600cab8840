#!/usr/bin/python3
# tests/ref/gen_train_refs.py: PyTorch references for `primc compile --train`: a few steps of torch.optim
# (SGD, SGD with momentum, Adam, AdamW) with torch's MSELoss or CrossEntropyLoss on a bundled model's ONNX
# graph, evaluated with torch ops in float64 (tests/ref/onnx_torch.py). For each case tests/data/train/CASE.npz
# holds the dataset (x, y: consecutive batches of the model's batch size, wrapping), the loss of every step
# and the weights after the last, named as the model's initializers. tests/data/train_dims.npz: the MLP with SGD
# on batches of 3, 8, 1 and 5 rows, for one step compiled with its batch a range (--dim N=1..8);
# tests/data/train_epochs.npz: the MLP with SGD over 2 epochs of 8 rows in batches of 3 (3, 3, 2 rows each epoch);
# tests/data/train_shuffle.npz: the same with each epoch's rows in numpy's RandomState(7) permutation order.
# Run with Debian's /usr/bin/python3 (python3-torch, python3-onnx: `tools/setup.sh models`).
# Usage: /usr/bin/python3 tests/ref/gen_train_refs.py [CASE ...]  (train, dims, epochs, shuffle; default all)
import os
import sys

import numpy as np
import onnx
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from onnx_torch import FLOAT, evaluate, load_params  # noqa: E402

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
OUT = os.path.join(ROOT, "tests", "data", "train")

# name, model, loss, optimizer, primc's options, torch.optim's class and arguments, steps, dataset rows
CASES = [
    ("mlp_mse_sgd", "mlp", "mse", "--optimizer sgd --lr 0.1 --weight-decay 0.01",
     lambda p: torch.optim.SGD(p, lr=0.1, weight_decay=0.01), 3, 8),
    ("mlp_mse_momentum", "mlp", "mse", "--optimizer momentum --lr 0.05 --momentum 0.9",
     lambda p: torch.optim.SGD(p, lr=0.05, momentum=0.9), 3, 8),
    # eps 1e-4: with torch's 1e-8 a gradient element near 1e-8 moves its weight by a good part of lr, from a
    # value whose f32 sum has lost most of its digits (f64 and f32 then differ by up to 1% of lr)
    ("mlp_ce_adam", "mlp", "cross_entropy", "--optimizer adam --lr 0.01 --weight-decay 0.01 --eps 1e-4",
     lambda p: torch.optim.Adam(p, lr=0.01, weight_decay=0.01, eps=1e-4), 3, 8),
    ("mlp_ce_adamw", "mlp", "cross_entropy", "--optimizer adamw --lr 0.01 --weight-decay 0.1",
     lambda p: torch.optim.AdamW(p, lr=0.01, weight_decay=0.1), 3, 12),
    ("resnet_tiny_ce_momentum", "resnet_tiny", "cross_entropy", "--optimizer momentum --lr 0.01 --momentum 0.9",
     lambda p: torch.optim.SGD(p, lr=0.01, momentum=0.9), 3, 2),
]


def main():
    os.makedirs(OUT, exist_ok=True)
    for name, model, loss_kind, opts, make_opt, steps, rows in CASES:
        m = onnx.load(os.path.join(ROOT, "models", model, "model.onnx"))
        env, params = load_params(m)
        inp = [i for i in m.graph.input if i.name not in env][0]
        shape = [d.dim_value for d in inp.type.tensor_type.shape.dim]
        rng = np.random.default_rng(1)
        x = rng.standard_normal([rows] + shape[1:]).astype(np.float32)
        out_shape = tuple(evaluate(m, {**env, inp.name: torch.tensor(x[:shape[0]]).to(FLOAT)})[0].shape)
        if loss_kind == "mse":
            y = rng.standard_normal((rows,) + out_shape[1:]).astype(np.float32)
        else:
            y = rng.integers(0, out_shape[1], rows).astype(np.int64)
        opt = make_opt([t for _, t in params])
        b, losses = shape[0], []
        for step in range(steps):
            idx = [(step * b + j) % rows for j in range(b)]
            pred = evaluate(m, {**env, inp.name: torch.tensor(x[idx]).to(FLOAT)})[0]
            if loss_kind == "mse":
                loss = torch.nn.functional.mse_loss(pred, torch.tensor(y[idx]).to(FLOAT))
            else:
                loss = torch.nn.functional.cross_entropy(pred, torch.tensor(y[idx]))
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(loss.item())
        out = {"x": x, "y": y, "losses": np.array(losses)}
        for pname, t in params:
            out["w:" + pname] = t.detach().numpy().astype(np.float32)
        with open(os.path.join(OUT, name + ".txt"), "w") as f:
            f.write(f"{model} --loss {loss_kind} {opts} {steps}\n")
        np.savez_compressed(os.path.join(OUT, name + ".npz"), **out)
        print(f"{name}: losses {', '.join(f'{v:.6g}' for v in losses)}")


def mlp_sgd(name, seed, rows, batches, **extra):
    """the MLP with MSE and SGD (lr 0.1) on rows random rows, a step on each batch (the rows' indices) in turn;
    tests/data/NAME.npz"""
    m = onnx.load(os.path.join(ROOT, "models", "mlp", "model.onnx"))
    env, params = load_params(m)
    inp = [i for i in m.graph.input if i.name not in env][0]
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((rows, 64)).astype(np.float32)
    y = rng.standard_normal((rows, 10)).astype(np.float32)
    opt = torch.optim.SGD([t for _, t in params], lr=0.1)
    losses = []
    for idx in batches:
        pred = evaluate(m, {**env, inp.name: torch.tensor(x[idx]).to(FLOAT)})[0]
        loss = torch.nn.functional.mse_loss(pred, torch.tensor(y[idx]).to(FLOAT))
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    out = {"x": x, "y": y, **extra, "losses": np.array(losses)}
    for pname, t in params:
        out["w:" + pname] = t.detach().numpy().astype(np.float32)
    np.savez_compressed(os.path.join(ROOT, "tests", "data", name + ".npz"), **out)
    print(f"{name}: losses {', '.join(f'{v:.6g}' for v in losses)}")


def dims_case():
    """batches of varying size, one after another through the dataset's rows"""
    sizes = [3, 8, 1, 5]
    ends = np.cumsum(sizes)
    mlp_sgd("train_dims", 2, sum(sizes), [np.arange(e - b, e) for b, e in zip(sizes, ends)], sizes=np.array(sizes))


def epochs_case():
    """2 epochs of 8 rows in order, batches of 3: each epoch 3, 3, then the 2 left over"""
    mlp_sgd("train_epochs", 3, 8, [np.arange(a, min(a + 3, 8)) for a in (0, 3, 6)] * 2)


def shuffle_case():
    """the same epochs with each one's rows in the order of the next np.random.RandomState(7).permutation(8)"""
    rs = np.random.RandomState(7)
    perms = [rs.permutation(8) for _ in range(2)]
    mlp_sgd("train_shuffle", 3, 8, [p[a:a + 3] for p in perms for a in (0, 3, 6)])


if __name__ == "__main__":
    which = sys.argv[1:] or ["train", "dims", "epochs", "shuffle"]
    for case, fn in (("train", main), ("dims", dims_case), ("epochs", epochs_case), ("shuffle", shuffle_case)):
        if case in which:
            fn()
