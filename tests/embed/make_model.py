#!/usr/bin/env python3
"""tests/embed/make_model.py: writes a small ONNX model, an input and onnxruntime's output (raw f32) into a directory."""
import sys

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper


def main(out_dir):
    rng = np.random.default_rng(7)
    w = rng.standard_normal((16, 8)).astype(np.float32)
    b = rng.standard_normal((8,)).astype(np.float32)
    nodes = [
        helper.make_node("MatMul", ["x", "w"], ["xw"], name="fc"),
        helper.make_node("Add", ["xw", "b"], ["h"], name="bias"),
        helper.make_node("Relu", ["h"], ["r"], name="act"),
        helper.make_node("Tanh", ["r"], ["y"], name="squash"),
    ]
    graph = helper.make_graph(
        nodes, "embed",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 16])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 8])],
        [numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, f"{out_dir}/model.onnx")
    x = rng.standard_normal((4, 16)).astype(np.float32)
    sess = ort.InferenceSession(f"{out_dir}/model.onnx", providers=["CPUExecutionProvider"])
    (y,) = sess.run(None, {"x": x})
    x.tofile(f"{out_dir}/input.bin")
    y.astype(np.float32).tofile(f"{out_dir}/ref.bin")


if __name__ == "__main__":
    main(sys.argv[1])
