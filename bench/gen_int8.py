#!/usr/bin/env python3
# bench/gen_int8.py: the int8 benchmark models of bench/precision.md, each a dir with model.onnx and input.npy for
# bench/precision_peers.py: OUT/mmi, a MatMulInteger u8 [128, 768] x i8 [768, 768] with zero points 128 and 3;
# OUT/enc, the BERT-base-sized encoder of bench/gen_encoder.py (f32); OUT/encq, that encoder through
# onnxruntime.quantization.quantize_dynamic(..., QuantType.QInt8). Usage: gen_int8.py OUT [--layers 12]
import argparse
import os
import subprocess
import sys

import numpy as np
import onnx
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper as nh
from onnxruntime.quantization import QuantType, quantize_dynamic

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
