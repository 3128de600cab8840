#!/usr/bin/env python3
# tests/ref/gen_big_graphs.py: models that are small files but long or wide graphs (issue 26), each with an
# input and its numpy-computed output: a chain of 10,000 elementwise ops (no recursion on graph depth), 40
# squarings of a value read twice each (no expression that doubles per step), and 20,000 MatMuls by a
# permutation (compile time linear in the number of kernels), 100,000 multiplications by one (the simplifier's
# replacements are linear, not a scan of the graph each), and a 27x27x27 MaxPool (19,683 window slices: the
# fuser's copies of cheap producers are linear), and a GRU of 3,000 steps (kernel-IR rewrites linear in kernels).
# Usage: gen_big_graphs.py OUT_DIR
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper

out = sys.argv[1]


def save(name, nodes, x, y, inits=()):
    d = os.path.join(out, name)
    os.makedirs(d, exist_ok=True)
    g = h.make_graph(nodes, name, [h.make_tensor_value_info("x", T.FLOAT, list(x.shape))],
                     [h.make_tensor_value_info("y", T.FLOAT, list(y.shape))], list(inits))
    onnx.save(h.make_model(g, opset_imports=[h.make_opsetid("", 17)]), os.path.join(d, "model.onnx"))
    np.save(os.path.join(d, "input.npy"), x)
    np.save(os.path.join(d, "expected.npy"), y.astype(np.float32))


def chain(name, n, x, ops):
    nodes, prev = [], "x"
    for i in range(n):
        o = "y" if i == n - 1 else f"v{i}"
        op, _ = ops[i % len(ops)]
        nodes.append(h.make_node(op, [prev] * (2 if op == "Mul" else 1), [o], name=f"{op.lower()}{i}"))
        prev = o
    y = x.astype(np.float64)
    for i in range(n):
        y = ops[i % len(ops)][1](y)
    return nodes, y


rng = np.random.default_rng(26)
x = rng.standard_normal((4, 8)).astype(np.float32)
nodes, y = chain("chain", 10000, x, [("Neg", np.negative), ("Abs", np.abs), ("Sigmoid", lambda v: 1 / (1 + np.exp(-v)))])
save("chain10k", nodes, x, y)

x = np.array([[1, -1, 0, 1], [-1, 1, 1, 0]], np.float32)
nodes, y = chain("squares", 40, x, [("Mul", lambda v: v * v)])
save("squares40", nodes, x, y)

n = 20000
p = np.eye(4, dtype=np.float32)[[1, 2, 3, 0]]  # order 4: x P^n, exact in float32
x = rng.standard_normal((4, 4)).astype(np.float32)
nodes, prev = [], "x"
for i in range(n):
    o = "y" if i == n - 1 else f"v{i}"
    nodes.append(h.make_node("MatMul", [prev, "p"], [o], name=f"mm{i}"))
    prev = o
save("matmul20k", nodes, x, x @ np.linalg.matrix_power(p, n), [numpy_helper.from_array(p, "p")])

n = 100000
x = rng.standard_normal((2, 3)).astype(np.float32)
nodes, prev = [], "x"
for i in range(n):
    nodes.append(h.make_node("Mul", [prev, "one"], [f"m{i}"], name=f"mul{i}"))
    prev = f"m{i}"
nodes.append(h.make_node("Neg", [prev], ["y"], name="neg"))
save("mulone100k", nodes, x, -x, [numpy_helper.from_array(np.ones((1,), np.float32), "one")])

x = rng.standard_normal((1, 1, 27, 27, 27)).astype(np.float32)
nodes = [h.make_node("MaxPool", ["x"], ["y"], kernel_shape=[27, 27, 27], name="pool")]
save("maxpool27", nodes, x, x.max().reshape(1, 1, 1, 1, 1))


def windows(xp, k, s, d):
    from numpy.lib.stride_tricks import sliding_window_view
    span = [(k[i] - 1) * d[i] + 1 for i in range(2)]
    w = sliding_window_view(xp, span, axis=(2, 3))
    return w[:, :, ::s[0], ::s[1], ::d[0], ::d[1]]


# 90 taps, strided, dilated and padded: the pools that go axis by axis match numpy's box windows
x = rng.standard_normal((1, 3, 30, 31)).astype(np.float32)
k, s, d, pads = [9, 10], [2, 3], [1, 2], [2, 3, 4, 1]
xp = np.pad(x, ((0, 0), (0, 0), (pads[0], pads[2]), (pads[1], pads[3])), constant_values=-np.inf)
nodes = [h.make_node("MaxPool", ["x"], ["y"], kernel_shape=k, strides=s, dilations=d, pads=pads, name="pool")]
save("maxpool90", nodes, x, windows(xp, k, s, d).max(axis=(4, 5)))
d = [1, 1]
xz = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (pads[0], pads[2]), (pads[1], pads[3])))
ones = np.pad(np.ones_like(x, np.float64), ((0, 0), (0, 0), (pads[0], pads[2]), (pads[1], pads[3])))
avg = windows(xz, k, s, d).sum(axis=(4, 5)) / windows(ones, k, s, d).sum(axis=(4, 5))
nodes = [h.make_node("AveragePool", ["x"], ["y"], kernel_shape=k, strides=s, pads=pads, name="pool")]
save("avgpool90", nodes, x, avg)
# a GRU over 3,000 steps (it unrolls to a dot and its elementwise kernels per step, every step's output live
# until the last): the kernel-IR rewrites look at a window of kernels per candidate, not every kernel
S, B, I, H = 3000, 2, 3, 5
rng = np.random.default_rng(26)
x = rng.standard_normal((S, B, I)).astype(np.float32)
w = (rng.standard_normal((1, 3 * H, I)) / 2).astype(np.float32)
r = (rng.standard_normal((1, 3 * H, H)) / 2).astype(np.float32)
bias = (rng.standard_normal((1, 6 * H)) / 4).astype(np.float32)


def sigmoid(v):
    return 1 / (1 + np.exp(-v))


wz, wr, wh = np.split(w[0].astype(np.float64), 3)
rz, rr, rh = np.split(r[0].astype(np.float64), 3)
wbz, wbr, wbh, rbz, rbr, rbh = np.split(bias[0].astype(np.float64), 6)
ht, ys = np.zeros((B, H)), []
for t in range(S):
    xt = x[t].astype(np.float64)
    z = sigmoid(xt @ wz.T + ht @ rz.T + wbz + rbz)
    rt = sigmoid(xt @ wr.T + ht @ rr.T + wbr + rbr)
    hh = np.tanh(xt @ wh.T + (rt * ht) @ rh.T + rbh + wbh)
    ht = (1 - z) * hh + z * ht
    ys.append(ht)
save("gru3000", [h.make_node("GRU", ["x", "w", "r", "b"], ["y"], hidden_size=H, name="gru")], x,
     np.stack(ys)[:, None], [numpy_helper.from_array(w, "w"), numpy_helper.from_array(r, "r"), numpy_helper.from_array(bias, "b")])
