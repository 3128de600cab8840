#!/usr/bin/env python3
# bench/gen_cross_attention.py OUT SQ SK: one cross-attention layer for the planner's figures (bench/attention.md):
# y = softmax(Q K^T / 8) V, Q from x [1, SQ, 768], K and V from m [1, SK, 768], 12 heads of 64; writes
# OUT/model.onnx, OUT/x.npy, OUT/m.npy
import sys, numpy as np, onnx
from onnx import helper as h, TensorProto as T, numpy_helper as nh
out, sq, sk = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
W, H, D = 768, 12, 64
rng = np.random.default_rng(0)
inits = [nh.from_array((rng.standard_normal((W, W)) * 0.05).astype(np.float32), n) for n in ("wq", "wk", "wv")]
inits += [nh.from_array(np.array(v, np.int64), n) for n, v in (("sq", [1, sq, H, D]), ("sk", [1, sk, H, D]), ("so", [1, sq, W]))]
inits += [nh.from_array(np.array(0.125, np.float32), "scale")]
nodes = [h.make_node("MatMul", ["x", "wq"], ["q0"], name="l0.q.mm"), h.make_node("MatMul", ["m", "wk"], ["k0"], name="l0.k.mm"),
         h.make_node("MatMul", ["m", "wv"], ["v0"], name="l0.v.mm"),
         h.make_node("Reshape", ["q0", "sq"], ["q1"], name="l0.qr0"), h.make_node("Transpose", ["q1"], ["q"], perm=[0, 2, 1, 3], name="l0.qr"),
         h.make_node("Reshape", ["k0", "sk"], ["k1"], name="l0.kr0"), h.make_node("Transpose", ["k1"], ["kt"], perm=[0, 2, 3, 1], name="l0.kr"),
         h.make_node("Reshape", ["v0", "sk"], ["v1"], name="l0.vr0"), h.make_node("Transpose", ["v1"], ["v"], perm=[0, 2, 1, 3], name="l0.vr"),
         h.make_node("MatMul", ["q", "kt"], ["s"], name="l0.qk"), h.make_node("Mul", ["s", "scale"], ["ss"], name="l0.sc"),
         h.make_node("Softmax", ["ss"], ["p"], axis=-1, name="l0.sm"), h.make_node("MatMul", ["p", "v"], ["a"], name="l0.av"),
         h.make_node("Transpose", ["a"], ["at"], perm=[0, 2, 1, 3], name="l0.ct"), h.make_node("Reshape", ["at", "so"], ["y"], name="l0.cr")]
g = h.make_graph(nodes, "x", [h.make_tensor_value_info("x", T.FLOAT, [1, sq, W]), h.make_tensor_value_info("m", T.FLOAT, [1, sk, W])],
                 [h.make_tensor_value_info("y", T.FLOAT, [1, sq, W])], inits)
import os; os.makedirs(out, exist_ok=True)
onnx.save(h.make_model(g, opset_imports=[h.make_opsetid("", 17)]), out + "/model.onnx")
np.save(out + "/x.npy", rng.standard_normal((1, sq, W)).astype(np.float32)); np.save(out + "/m.npy", rng.standard_normal((1, sk, W)).astype(np.float32))
