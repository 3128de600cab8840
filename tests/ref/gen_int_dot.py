#!/usr/bin/env python3
# tests/ref/gen_int_dot.py: integer contractions on the exact bf16 path (issue 20): a MatMulInteger with a zero point
# given at run time (numpy int64 reference, compared exactly), a dynamically quantized linear layer
# (DynamicQuantizeLinear + MatMulInteger + rescale) and a QLinearMatMul (ONNX Runtime's outputs as their references).
# Writes OUT/mmi/, OUT/dyn/, OUT/qlm/: model.onnx, in*.npy, ref0.npy. Usage: gen_int_dot.py OUT
import os
import sys

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper as nh

out = sys.argv[1]
rng = np.random.default_rng(11)


def save(name, nodes, inputs, outputs, inits, feeds, ref):
    d = os.path.join(out, name)
    os.makedirs(d, exist_ok=True)
    g = h.make_graph(nodes, name, inputs, outputs, inits)
    onnx.save(h.make_model(g, opset_imports=[h.make_opsetid("", 17)]), os.path.join(d, "model.onnx"))
    for i, f in enumerate(feeds):
        np.save(os.path.join(d, f"in{i}.npy"), f)
    np.save(os.path.join(d, "ref0.npy"), ref)


# MatMulInteger, K = 300 (two chunks of the exact path), a batch of 3, a's zero point an input
a = rng.integers(0, 256, (3, 40, 300), dtype=np.uint8)
za = np.array(131, np.uint8)
b = rng.integers(-128, 128, (300, 70), dtype=np.int8)
zb = np.array(-3, np.int8)
ref = ((a.astype(np.int64) - int(za)) @ (b.astype(np.int64) - int(zb))).astype(np.int32)
save("mmi", [h.make_node("MatMulInteger", ["a", "b", "za", "zb"], ["y"], name="mmi")],
     [h.make_tensor_value_info("a", T.UINT8, a.shape), h.make_tensor_value_info("za", T.UINT8, [])],
     [h.make_tensor_value_info("y", T.INT32, None)], [nh.from_array(b, "b"), nh.from_array(zb, "zb")], [a, za], ref)

# a dynamically quantized linear layer, as onnxruntime.quantization.quantize_dynamic writes one
x = rng.standard_normal((64, 500)).astype(np.float32)
w = rng.integers(-127, 128, (500, 96), dtype=np.int8)
ws = np.array(0.02, np.float32)
nodes = [
    h.make_node("DynamicQuantizeLinear", ["x"], ["xq", "xs", "xz"], name="dql"),
    h.make_node("MatMulInteger", ["xq", "w", "xz"], ["acc"], name="mmi"),
    h.make_node("Cast", ["acc"], ["accf"], to=T.FLOAT, name="cast"),
    h.make_node("Mul", ["xs", "ws"], ["scale"], name="scale"),
    h.make_node("Mul", ["accf", "scale"], ["y"], name="rescale"),
]
model_inits = [nh.from_array(w, "w"), nh.from_array(ws, "ws")]
g = h.make_graph(nodes, "dyn", [h.make_tensor_value_info("x", T.FLOAT, x.shape)],
                 [h.make_tensor_value_info("y", T.FLOAT, None)], model_inits)
m = h.make_model(g, opset_imports=[h.make_opsetid("", 17)])
y = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
save("dyn", nodes, [h.make_tensor_value_info("x", T.FLOAT, x.shape)], [h.make_tensor_value_info("y", T.FLOAT, None)],
     model_inits, [x], y)

# QLinearMatMul (QOperator format): the i32 dot inside on the exact path, requantized to u8; ONNX Runtime's output
qa = rng.integers(0, 256, (64, 300), dtype=np.uint8)
qb = rng.integers(-128, 128, (300, 48), dtype=np.int8)
q_inits = [nh.from_array(np.array(0.05, np.float32), "as"), nh.from_array(np.array(120, np.uint8), "az"),
           nh.from_array(qb, "b"), nh.from_array(np.array(0.01, np.float32), "bs"),
           nh.from_array(np.array(0, np.int8), "bz"), nh.from_array(np.array(2.0, np.float32), "ys"),
           nh.from_array(np.array(128, np.uint8), "yz")]
q_nodes = [h.make_node("QLinearMatMul", ["a", "as", "az", "b", "bs", "bz", "ys", "yz"], ["y"], name="qlm")]
q_in = [h.make_tensor_value_info("a", T.UINT8, qa.shape)]
q_out = [h.make_tensor_value_info("y", T.UINT8, None)]
qm = h.make_model(h.make_graph(q_nodes, "qlm", q_in, q_out, q_inits), opset_imports=[h.make_opsetid("", 17)])
qy = ort.InferenceSession(qm.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"a": qa})[0]
save("qlm", q_nodes, q_in, q_out, q_inits, [qa], qy)
