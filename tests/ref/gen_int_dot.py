#!/usr/bin/env python3
# tests/ref/gen_int_dot.py: integer contractions on the int8 GEMM (issue 20): MatMulIntegers with a zero point given at
# run time and with per-column zero points (numpy int64 references, compared exactly), a dynamically quantized linear
# layer (DynamicQuantizeLinear + MatMulInteger + rescale), a QLinearMatMul and two MLPs through
# onnxruntime.quantization.quantize_dynamic (ONNX Runtime's outputs as their references, run on its exact u8 x u8
# path: tests/ref/ort_exact.py).
# Writes OUT/mmi/, dyn/, qlm/, pcz/, qd/, qdpc/: model.onnx, in*.npy, ref0.npy. Usage: gen_int_dot.py OUT
import os
import sys

import numpy as np
import onnx
import onnxruntime as ort
from ort_exact import unsaturated
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
y = ort.InferenceSession(unsaturated(m).SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
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
qy = ort.InferenceSession(unsaturated(qm).SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"a": qa})[0]
save("qlm", q_nodes, q_in, q_out, q_inits, [qa], qy)

# MatMulInteger with u8 weights and a zero point per column: together the columns span more than 256 values, each
# column at most 256 (the int8 GEMM's per-column offsets); numpy int64 reference
pa = rng.integers(0, 256, (50, 200), dtype=np.uint8)
pb = rng.integers(0, 256, (200, 40), dtype=np.uint8)
pzb = rng.integers(0, 256, (40,), dtype=np.uint8)
pref = ((pa.astype(np.int64) - 7) @ (pb.astype(np.int64) - pzb.astype(np.int64))).astype(np.int32)
save("pcz", [h.make_node("MatMulInteger", ["a", "b", "za", "zb"], ["y"], name="pcz")],
     [h.make_tensor_value_info("a", T.UINT8, pa.shape)], [h.make_tensor_value_info("y", T.INT32, None)],
     [nh.from_array(pb, "b"), nh.from_array(np.array(7, np.uint8), "za"), nh.from_array(pzb, "zb")], [pa], pref)


# a two-layer MLP through onnxruntime.quantization.quantize_dynamic, as users quantize models: QInt8 weights, and
# QUInt8 weights with per-channel zero points; ONNX Runtime's outputs of the quantized models as references
def quantized_mlp(name, **kw):
    import tempfile
    from onnxruntime.quantization import quantize_dynamic
    xm = rng.standard_normal((32, 96)).astype(np.float32)
    w1 = (rng.standard_normal((96, 128)) * 0.1).astype(np.float32)
    w2 = (rng.standard_normal((128, 64)) * 0.1).astype(np.float32)
    nodes = [h.make_node("MatMul", ["x", "w1"], ["h0"]), h.make_node("Add", ["h0", "b1"], ["h1"]),
             h.make_node("Relu", ["h1"], ["h2"]), h.make_node("MatMul", ["h2", "w2"], ["h3"]),
             h.make_node("Add", ["h3", "b2"], ["y"])]
    inits = [nh.from_array(w1, "w1"), nh.from_array(w2, "w2"),
             nh.from_array(rng.standard_normal(128).astype(np.float32), "b1"),
             nh.from_array(rng.standard_normal(64).astype(np.float32), "b2")]
    g = h.make_graph(nodes, name, [h.make_tensor_value_info("x", T.FLOAT, xm.shape)],
                     [h.make_tensor_value_info("y", T.FLOAT, None)], inits)
    d = os.path.join(out, name)
    os.makedirs(d, exist_ok=True)
    with tempfile.TemporaryDirectory() as t:
        f = os.path.join(t, "f32.onnx")
        onnx.save(h.make_model(g, opset_imports=[h.make_opsetid("", 17)]), f)
        quantize_dynamic(f, os.path.join(d, "model.onnx"), **kw)
    s = ort.InferenceSession(unsaturated(onnx.load(os.path.join(d, "model.onnx"))).SerializeToString(),
                             providers=["CPUExecutionProvider"])
    np.save(os.path.join(d, "in0.npy"), xm)
    np.save(os.path.join(d, "ref0.npy"), s.run(None, {"x": xm})[0])


from onnxruntime.quantization import QuantType  # noqa: E402

quantized_mlp("qd", weight_type=QuantType.QInt8)
quantized_mlp("qdpc", weight_type=QuantType.QUInt8, per_channel=True)
