#!/usr/bin/env python3
# examples/train_digits/run.py: trains an MLP on scikit-learn's handwritten digits with a training step
# compiled by primc, then measures its test accuracy with numpy from the saved weights (not with primc).
#   digits.npz  the 1,797 8x8 images of sklearn.datasets.load_digits() (pixels 0..16) and their labels, saved
#               once so that the example needs no scikit-learn: d = load_digits(); np.savez_compressed(
#               "digits.npz", x=d.data.astype(np.uint8), y=d.target.astype(np.uint8))
#   run.py      the model (64 -> 64 -> ReLU -> 10, ONNX, He-initialized), a fixed 75/25 split, the compile,
#               the training run, the test accuracy; loss.csv, and loss.png when matplotlib is there
# Usage: python3 examples/train_digits/run.py [--primc build/primc] [--steps 1500] [--out DIR]
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
    g = helper.make_graph(nodes, "digits_mlp", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [BATCH, 64])],
                          [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [BATCH, 10])], inits)
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
    ap.add_argument("--steps", type=int, default=1500)
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
    subprocess.run([a.primc, "compile", model, "--train", "--loss", "cross_entropy", "--label", "digit",
                    "--optimizer", "adam", "--lr", "0.003", "-o", exe], check=True)
    saved = os.path.join(a.out, "trained.safetensors")
    run = subprocess.run([exe, os.path.join(a.out, "x_train.npy"), os.path.join(a.out, "y_train.npy"),
                          "--steps", str(a.steps), "--log-every", "10", "--save", saved],
                         check=True, capture_output=True, text=True)
    curve = [(int(f[1]), float(f[3])) for f in (line.split() for line in run.stdout.splitlines()) if f[0] == "step"]
    with open(os.path.join(a.out, "loss.csv"), "w") as f:
        f.write("step,loss\n" + "".join(f"{s},{v}\n" for s, v in curve))
    w = read_safetensors(saved)
    h = np.maximum(x[te] @ w["fc1.weight"].T + w["fc1.bias"], 0)
    acc = float(((h @ w["fc2.weight"].T + w["fc2.bias"]).argmax(1) == y[te]).mean())
    print(f"{a.steps} steps of batch {BATCH} ({a.steps * BATCH / len(tr):.0f} epochs): loss {curve[0][1]:.3f} -> "
          f"{curve[-1][1]:.3f}, test accuracy {acc:.4f} on {len(te)} digits")
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        fig, ax = plt.subplots(figsize=(6, 3.2))
        ax.plot([s for s, _ in curve], [v for _, v in curve], lw=1)
        ax.set_xlabel("step (batch of 32)")
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
