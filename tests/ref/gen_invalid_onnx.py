#!/usr/bin/env python3
# tests/ref/gen_invalid_onnx.py: small models that ONNX Runtime refuses or that ask for absurd memory (issue 26),
# written to OUT_DIR/NAME.onnx. Usage: gen_invalid_onnx.py OUT_DIR
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper

out = sys.argv[1]
os.makedirs(out, exist_ok=True)


def save(name, nodes, inputs, outputs, inits=()):
    g = h.make_graph(nodes, name, inputs, outputs, list(inits))
    onnx.save(h.make_model(g, opset_imports=[h.make_opsetid("", 17)]), os.path.join(out, name + ".onnx"))


x4 = h.make_tensor_value_info("x", T.FLOAT, [4])
y4 = h.make_tensor_value_info("y", T.FLOAT, [4])

# two nodes produce "t": the second would silently replace the first
save("duplicate_output", [h.make_node("Relu", ["x"], ["t"], name="first"), h.make_node("Neg", ["x"], ["t"], name="second"),
                          h.make_node("Abs", ["t"], ["y"], name="last")], [x4], [y4])
# a node output named like the graph input
save("output_shadows_input", [h.make_node("Relu", ["x"], ["x"], name="again"), h.make_node("Abs", ["x"], ["y"], name="last")],
     [x4], [y4])
# an initializer named like a graph input but of another shape (the input's default value must fit it)
save("initializer_shape_mismatch", [h.make_node("Add", ["x", "w"], ["y"], name="add")],
     [x4, h.make_tensor_value_info("w", T.FLOAT, [4])], [y4], [numpy_helper.from_array(np.ones(3, np.float32), "w")])
# ... and of another element type
save("initializer_dtype_mismatch", [h.make_node("Add", ["x", "w"], ["y"], name="add")],
     [x4, h.make_tensor_value_info("w", T.FLOAT, [4])], [y4], [numpy_helper.from_array(np.ones(4, np.float64), "w")])
# no initializer at all, 200 bytes: a constant shape of 2^30 floats (4 GiB)
save("constant_of_shape_4g",
     [h.make_node("Constant", [], ["s"], value=numpy_helper.from_array(np.array([1 << 30], np.int64)), name="shape"),
      h.make_node("ConstantOfShape", ["s"], ["y"], value=numpy_helper.from_array(np.array([1.0], np.float32)), name="fill")],
     [], [h.make_tensor_value_info("y", T.FLOAT, [1 << 30])])
# the same initializer-as-default pattern done right: accepted (shape and type agree)
save("initializer_default_ok", [h.make_node("Add", ["x", "w"], ["y"], name="add")],
     [x4, h.make_tensor_value_info("w", T.FLOAT, [4])], [y4], [numpy_helper.from_array(np.ones(4, np.float32), "w")])
# a 256 KiB initializer added to itself 2,000 times: every sum folds to a constant at import, 500 MiB in all
n = 2000
save("fold_chain_500m",
     [h.make_node("Add", ["c" if i == 0 else f"s{i - 1}", "c"], ["y" if i == n - 1 else f"s{i}"], name=f"add{i}")
      for i in range(n)],
     [], [h.make_tensor_value_info("y", T.FLOAT, [65536])], [numpy_helper.from_array(np.ones(65536, np.float32), "c")])
# 64-bit attributes once cast to int: keepdims 2^32 read as 0 (a silently different shape), Cast to 2^32 + 1 read
# as FLOAT (1)
x23 = h.make_tensor_value_info("x", T.FLOAT, [2, 3])
save("keepdims_2p32", [h.make_node("ReduceSum", ["x"], ["y"], keepdims=1 << 32, name="sum")], [x23],
     [h.make_tensor_value_info("y", T.FLOAT, None)])
save("cast_to_2p32", [h.make_node("Cast", ["x"], ["y"], to=(1 << 32) + 1, name="cast")], [x23],
     [h.make_tensor_value_info("y", T.FLOAT, None)])
