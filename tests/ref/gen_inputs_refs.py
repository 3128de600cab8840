#!/usr/bin/env python3
# tests/ref/gen_inputs_refs.py: a model whose input dims are named every way exporters write them (a
# dim_param, -1, "?", nothing) and whose output depends on a mode input through an If with branches of
# different shapes, so it compiles only with the mode fixed (--const). References are numpy's, per mode.
# Usage: gen_inputs_refs.py OUT_DIR (writes switch.onnx, x.npy, bias.npy, mode1.npy, expected_mode{0,1}.npy)
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto as T
from onnx import helper as h

out = sys.argv[1]
os.makedirs(out, exist_ok=True)

x = h.make_tensor_value_info("x", T.FLOAT, ["batch", 3, -1, "?"])
mode = h.make_tensor_value_info("mode", T.INT64, [])
bias = h.make_tensor_value_info("bias", T.FLOAT, [None])  # a dim with neither value nor name
y = h.make_tensor_value_info("y", T.FLOAT, None)

then_g = h.make_graph(
    [h.make_node("Add", ["x", "bias"], ["s"]),
     h.make_node("ReduceSum", ["s", "axes"], ["t_out"], keepdims=0)],
    "then", [], [h.make_tensor_value_info("t_out", T.FLOAT, None)],
    [h.make_tensor("axes", T.INT64, [1], [3])])
else_g = h.make_graph(
    [h.make_node("Sigmoid", ["x"], ["sg"]),
     h.make_node("Mul", ["sg", "two"], ["e_out"])],
    "else", [], [h.make_tensor_value_info("e_out", T.FLOAT, None)],
    [h.make_tensor("two", T.FLOAT, [], [2.0])])
nodes = [h.make_node("Equal", ["mode", "one"], ["cond"]),
         h.make_node("If", ["cond"], ["y"], name="switch", then_branch=then_g, else_branch=else_g)]
g = h.make_graph(nodes, "switch", [x, mode, bias], [y], [h.make_tensor("one", T.INT64, [], [1])])
m = h.make_model(g, opset_imports=[h.make_opsetid("", 17)])
m.ir_version = 8
onnx.save(m, os.path.join(out, "switch.onnx"))

rng = np.random.default_rng(21)
xv = rng.standard_normal((2, 3, 4, 5)).astype(np.float32)
bv = rng.standard_normal((5,)).astype(np.float32)
np.save(os.path.join(out, "x.npy"), xv)
np.save(os.path.join(out, "bias.npy"), bv)
np.save(os.path.join(out, "mode1.npy"), np.array(1, np.int64))
x64 = xv.astype(np.float64)
np.save(os.path.join(out, "expected_mode1.npy"), (x64 + bv).sum(axis=3).astype(np.float32))
np.save(os.path.join(out, "expected_mode0.npy"), (2 / (1 + np.exp(-x64))).astype(np.float32))
