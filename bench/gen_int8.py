#!/usr/bin/env python3
# bench/gen_int8.py: the int8 benchmark models of bench/precision.md, each a dir with model.onnx and input.npy for
# bench/precision_peers.py: OUT/mmi, a MatMulInteger u8 [128, 768] x i8 [768, 768] with zero points 128 and 3;
# OUT/enc, the BERT-base-sized encoder of bench/gen_encoder.py (f32); OUT/encq, that encoder through
# onnxruntime.quantization.quantize_dynamic(..., QuantType.QInt8); OUT/qconv_* QLinearConv layers (u8 input, per-channel
# s8 weights: ResNet's 3x3 64->64 at 56x56, 256->256 at 14x14, a 1x1 256->64 at 56x56, a 3x3/2 64->128, the 7x7/2
# 3-channel stem at 224); OUT/r18 (bench/gen_resnet.py's ResNet-18, f32) and its quantize_static'd forms, OUT/r18qdq
# (QDQ, per-channel weights) and OUT/r18qop (QOperator: QLinearConv, com.microsoft QLinearAdd, ...), u8 activations
# calibrated on 4 perturbed inputs. Usage: gen_int8.py OUT [--layers 12]
import argparse
import os
import subprocess
import sys

import numpy as np
import onnx
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper as nh
from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_dynamic, quantize_static

ap = argparse.ArgumentParser()
ap.add_argument("out")
ap.add_argument("--layers", type=int, default=12)
a = ap.parse_args()
rng = np.random.default_rng(5)

d = os.path.join(a.out, "mmi")
os.makedirs(d, exist_ok=True)
b = rng.integers(-128, 128, (768, 768), dtype=np.int8)
g = h.make_graph([h.make_node("MatMulInteger", ["a", "b", "za", "zb"], ["y"], name="mmi")], "mmi",
                 [h.make_tensor_value_info("a", T.UINT8, [128, 768])], [h.make_tensor_value_info("y", T.INT32, None)],
                 [nh.from_array(b, "b"), nh.from_array(np.array(128, np.uint8), "za"),
                  nh.from_array(np.array(3, np.int8), "zb")])
onnx.save(h.make_model(g, opset_imports=[h.make_opsetid("", 17)]), os.path.join(d, "model.onnx"))
np.save(os.path.join(d, "input.npy"), rng.integers(0, 256, (128, 768), dtype=np.uint8))

enc, encq = os.path.join(a.out, "enc"), os.path.join(a.out, "encq")
here = os.path.dirname(os.path.abspath(__file__))
subprocess.run([sys.executable, os.path.join(here, "gen_encoder.py"), enc, "--layers", str(a.layers)], check=True)
os.makedirs(encq, exist_ok=True)
quantize_dynamic(os.path.join(enc, "model.onnx"), os.path.join(encq, "model.onnx"), weight_type=QuantType.QInt8)
np.save(os.path.join(encq, "input.npy"), np.load(os.path.join(enc, "input.npy")))


def qconv(name, c, o, hw, k, s):
    d = os.path.join(a.out, name)
    os.makedirs(d, exist_ok=True)
    w = rng.integers(-128, 128, (o, c, k, k), dtype=np.int8)
    ins = ["x", "xs", "xz", "w", "ws", "wz", "ys", "yz", "b"]
    node = h.make_node("QLinearConv", ins, ["y"], name="qconv", pads=[k // 2] * 4, strides=[s, s])
    g = h.make_graph([node], "qconv", [h.make_tensor_value_info("x", T.UINT8, [1, c, hw, hw])],
                     [h.make_tensor_value_info("y", T.UINT8, None)],
                     [nh.from_array(np.array(0.02, np.float32), "xs"), nh.from_array(np.array(128, np.uint8), "xz"),
                      nh.from_array(w, "w"), nh.from_array((rng.random(o) * 0.01 + 0.001).astype(np.float32), "ws"),
                      nh.from_array(np.zeros(o, np.int8), "wz"), nh.from_array(np.array(0.5, np.float32), "ys"),
                      nh.from_array(np.array(120, np.uint8), "yz"),
                      nh.from_array(rng.integers(-1000, 1000, o, dtype=np.int32), "b")])
    onnx.save(h.make_model(g, opset_imports=[h.make_opsetid("", 13)]), os.path.join(d, "model.onnx"))
    np.save(os.path.join(d, "input.npy"), rng.integers(0, 256, (1, c, hw, hw), dtype=np.uint8))


qconv("qconv_64", 64, 64, 56, 3, 1)
qconv("qconv_256", 256, 256, 14, 3, 1)
qconv("qconv_1x1", 256, 64, 56, 1, 1)
qconv("qconv_s2", 64, 128, 56, 3, 2)
qconv("qconv_stem", 3, 64, 224, 7, 2)

r18 = os.path.join(a.out, "r18")
subprocess.run([sys.executable, os.path.join(here, "gen_resnet.py"), r18, "--depth", "18"], check=True)
x = np.load(os.path.join(r18, "input.npy"))
name = onnx.load(os.path.join(r18, "model.onnx")).graph.input[0].name


class Reader(CalibrationDataReader):
    def __init__(self):
        self.it = iter([{name: (x + rng.normal(0, 0.1, x.shape)).astype(np.float32)} for _ in range(4)])

    def get_next(self):
        return next(self.it, None)


for fmt, tag in [(QuantFormat.QDQ, "r18qdq"), (QuantFormat.QOperator, "r18qop")]:
    d = os.path.join(a.out, tag)
    os.makedirs(d, exist_ok=True)
    quantize_static(os.path.join(r18, "model.onnx"), os.path.join(d, "model.onnx"), Reader(), quant_format=fmt,
                    activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8, per_channel=True)
    np.save(os.path.join(d, "input.npy"), x)
