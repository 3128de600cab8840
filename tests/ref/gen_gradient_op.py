#!/usr/bin/env python3
# tests/ref/gen_gradient_op.py: an ONNX model with the Gradient op (ai.onnx.preview.training) and numpy references
# for tests/suites/grad.sh: y = tanh(a @ W) * b with W an initializer; Gradient(xs=[a, W], zs=[b], y=y) gives the
# gradients of sum(y) with respect to a and W, written out by hand in float64.
# Usage: python3 tests/ref/gen_gradient_op.py (writes tests/data/grad/)
import os

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data", "grad")


def main():
    os.makedirs(OUT, exist_ok=True)
    rng = np.random.default_rng(7)
    a = rng.standard_normal((2, 3)).astype(np.float32)
    b = rng.standard_normal((2, 4)).astype(np.float32)
    w = rng.standard_normal((3, 4)).astype(np.float32)
    nodes = [helper.make_node("MatMul", ["a", "W"], ["h"]), helper.make_node("Tanh", ["h"], ["t"]),
             helper.make_node("Mul", ["t", "b"], ["y"]),
             helper.make_node("Gradient", ["a", "W", "b"], ["da", "dW"], domain="ai.onnx.preview.training",
                              xs=["a", "W"], zs=["b"], y="y")]
    f = TensorProto.FLOAT
    g = helper.make_graph(nodes, "gradient_op",
                          [helper.make_tensor_value_info("a", f, [2, 3]), helper.make_tensor_value_info("b", f, [2, 4])],
                          [helper.make_tensor_value_info(n, f, s) for n, s in (("y", [2, 4]), ("da", [2, 3]), ("dW", [3, 4]))],
                          [numpy_helper.from_array(w, "W")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("ai.onnx.preview.training", 1)])
    onnx.save(m, os.path.join(OUT, "gradient_op.onnx"))
    a64, b64, w64 = a.astype(np.float64), b.astype(np.float64), w.astype(np.float64)
    t = np.tanh(a64 @ w64)
    dh = (1 - t * t) * b64  # d sum(y) / d h
    np.save(os.path.join(OUT, "a.npy"), a)
    np.save(os.path.join(OUT, "b.npy"), b)
    for name, v in (("y", t * b64), ("da", dh @ w64.T), ("dW", a64.T @ dh)):
        np.save(os.path.join(OUT, f"{name}.npy"), v.astype(np.float32))


if __name__ == "__main__":
    main()
