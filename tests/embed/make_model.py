#!/usr/bin/env python3
"""tests/embed/make_model.py: writes a small ONNX model, an input and onnxruntime's output (raw f32) into a directory."""
import sys

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper


def main(out_dir):
    rng = np.random.default_rng(7)
    # a 3x3 conv (64 channels on 8x8: compiled as Winograd, weights transformed at compile time), a 1x1
    # conv (weights packed as GEMM strips), then a linear layer: every packed weight layout travels in the
    # object and in the external weights file
    k3 = (0.05 * rng.standard_normal((64, 64, 3, 3))).astype(np.float32)
    k1 = (0.2 * rng.standard_normal((16, 64, 1, 1))).astype(np.float32)
    w = (0.1 * rng.standard_normal((256, 8))).astype(np.float32)
    b = rng.standard_normal((8,)).astype(np.float32)
    shape = np.array([4, 256], dtype=np.int64)
    nodes = [
        helper.make_node("Conv", ["x", "k3"], ["c3"], name="conv3x3", pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c3"], ["r3"], name="act3"),
        helper.make_node("Conv", ["r3", "k1"], ["c1"], name="conv1x1"),
        helper.make_node("Reshape", ["c1", "shape"], ["flat"], name="flatten"),
        helper.make_node("MatMul", ["flat", "w"], ["xw"], name="fc"),
        helper.make_node("Add", ["xw", "b"], ["h"], name="bias"),
        helper.make_node("Relu", ["h"], ["r"], name="act"),
        helper.make_node("Tanh", ["r"], ["y"], name="squash"),
    ]
    graph = helper.make_graph(
        nodes, "embed",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 64, 8, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 8])],
        [numpy_helper.from_array(k3, "k3"), numpy_helper.from_array(k1, "k1"), numpy_helper.from_array(w, "w"),
         numpy_helper.from_array(b, "b"), numpy_helper.from_array(shape, "shape")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, f"{out_dir}/model.onnx")
    x = rng.standard_normal((1, 64, 8, 8)).astype(np.float32)
    sess = ort.InferenceSession(f"{out_dir}/model.onnx", providers=["CPUExecutionProvider"])
    (y,) = sess.run(None, {"x": x})
    x.tofile(f"{out_dir}/input.bin")
    y.astype(np.float32).tofile(f"{out_dir}/ref.bin")


if __name__ == "__main__":
    main(sys.argv[1])
