#!/usr/bin/env python3
# examples/train_digits/run.py: trains an MLP on scikit-learn's handwritten digits with a training step
# compiled by primc, then measures its test accuracy with numpy from the saved weights (not with primc).
#   digits.npz  the 1,797 8x8 images of sklearn.datasets.load_digits() (pixels 0..16) and their labels, saved
#               once so that the example needs no scikit-learn: d = load_digits(); np.savez_compressed(
#               "digits.npz", x=d.data.astype(np.uint8), y=d.target.astype(np.uint8))
#   run.py      the model (64 -> 64 -> ReLU -> 10, ONNX, He-initialized, its batch dim N), a fixed 75/25 split,
#               the compile (the batch a range, N=1..32, so each epoch's last, short batch runs too), the training
#               run (epochs of shuffled batches of 32), the test accuracy; loss.csv, and loss.png when matplotlib
#               is there
# Usage: python3 examples/train_digits/run.py [--primc build/primc] [--epochs 36] [--out DIR]
import argparse
import json
import os
import subprocess
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
BATCH = 32


def make_model(path, rng):
    def init(name, shape, fan_in):
        return numpy_helper.from_array((rng.standard_normal(shape) * np.sqrt(2.0 / fan_in)).astype(np.float32), name)
    nodes = [helper.make_node("Gemm", ["x", "fc1.weight", "fc1.bias"], ["h"], transB=1),
             helper.make_node("Relu", ["h"], ["a"]),
             helper.make_node("Gemm", ["a", "fc2.weight", "fc2.bias"], ["logits"], transB=1)]
    inits = [init("fc1.weight", (64, 64), 64), numpy_helper.from_array(np.zeros(64, np.float32), "fc1.bias"),
             init("fc2.weight", (10, 64), 64), numpy_helper.from_array(np.zeros(10, np.float32), "fc2.bias")]
    g = helper.make_graph(nodes, "digits_mlp", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 64])],
                          [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["N", 10])], inits)
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), path)


def read_safetensors(path):
    with open(path, "rb") as f:
        raw = f.read()
    n = int.from_bytes(raw[:8], "little")
    hdr = json.loads(raw[8:8 + n])
    return {k: np.frombuffer(raw[8 + n + v["data_offsets"][0]:8 + n + v["data_offsets"][1]], np.float32).reshape(v["shape"])
            for k, v in hdr.items() if k != "__metadata__"}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--primc", default="build/primc")
    ap.add_argument("--epochs", type=int, default=36)
    ap.add_argument("--out", default=os.path.join(HERE, "out"))
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    rng = np.random.default_rng(0)
    d = np.load(os.path.join(HERE, "digits.npz"))
    x, y = d["x"].astype(np.float32) / 16.0, d["y"].astype(np.int64)
    order = rng.permutation(len(y))
    n_train = len(y) * 3 // 4
    tr, te = order[:n_train], order[n_train:]
    np.save(os.path.join(a.out, "x_train.npy"), x[tr])
    np.save(os.path.join(a.out, "y_train.npy"), y[tr])
    model = os.path.join(a.out, "mlp.onnx")
    make_model(model, rng)
    exe = os.path.join(a.out, "train_digits")
    subprocess.run([a.primc, "compile", model, "--dim", f"N=1..{BATCH}", "--train", "--loss", "cross_entropy",
                    "--label", "digit", "--optimizer", "adam", "--lr", "0.003", "-o", exe], check=True)
    saved = os.path.join(a.out, "trained.safetensors")
    run = subprocess.run([exe, os.path.join(a.out, "x_train.npy"), os.path.join(a.out, "y_train.npy"),
                          "--epochs", str(a.epochs), "--shuffle", "0", "--batch", str(BATCH), "--log-every", "10",
                          "--save", saved],
                         check=True, capture_output=True, text=True)
    curve = [(int(f[1]), float(f[3])) for f in (line.split() for line in run.stdout.splitlines()) if f[0] == "step"]
    with open(os.path.join(a.out, "loss.csv"), "w") as f:
        f.write("step,loss\n" + "".join(f"{s},{v}\n" for s, v in curve))
    w = read_safetensors(saved)
    h = np.maximum(x[te] @ w["fc1.weight"].T + w["fc1.bias"], 0)
    acc = float(((h @ w["fc2.weight"].T + w["fc2.bias"]).argmax(1) == y[te]).mean())
    epochs = [float(f[3]) for f in (line.split() for line in run.stdout.splitlines()) if f[0] == "epoch"]
    print(f"{a.epochs} epochs of {len(tr)} digits in shuffled batches of {BATCH} ({curve[-1][0]} steps): epoch loss "
          f"{epochs[0]:.3f} -> {epochs[-1]:.3f}, test accuracy {acc:.4f} on {len(te)} digits")
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        fig, ax = plt.subplots(figsize=(6, 3.2))
        per = curve[-1][0] / len(epochs)
        ax.plot([s for s, _ in curve], [v for _, v in curve], lw=0.8, alpha=0.5, label="every 10th step's batch")
        ax.plot([(e + 1) * per for e in range(len(epochs))], epochs, lw=1.6, label="each epoch's mean")
        ax.legend()
        ax.set_xlabel("step (shuffled batches of 32)")
        ax.set_ylabel("cross-entropy loss")
        ax.set_yscale("log")
        ax.set_title(f"primc --train, Adam: MLP on sklearn digits, test accuracy {acc:.1%}")
        fig.tight_layout()
        fig.savefig(os.path.join(a.out, "loss.png"), dpi=110)
    except ImportError:
        pass
    return 0 if acc >= 0.95 else 1


if __name__ == "__main__":
    sys.exit(main())
