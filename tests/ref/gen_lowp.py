#!/usr/bin/env python3
# tests/ref/gen_lowp.py: small f16 and bf16 models with float64 numpy references (issue 20), written as
# OUT_DIR/NAME/{model.onnx, in0.npy ..., expected.npy}. The reference widens the narrow inputs exactly, computes
# in float64 and rounds once to the output type, which is what the prims define (ir/prims.def: contractions
# accumulate wider than their operands). Usage: gen_lowp.py OUT_DIR
import math
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper as nh

out = sys.argv[1]
rng = np.random.default_rng(20)


def bf16_round(x):
    """float64 -> nearest bfloat16 (ties to even), returned as float32 holding that value"""
    b = np.asarray(x, np.float32).view(np.uint32).astype(np.uint64)
    b = (b + 0x7FFF + ((b >> 16) & 1)) & 0xFFFF0000
    return b.astype(np.uint32).view(np.float32)


def save(name, nodes, inputs, outputs, inits, feeds, expected, opset=17):
    d = os.path.join(out, name)
    os.makedirs(d, exist_ok=True)
    g = h.make_graph(nodes, name, inputs, outputs, inits)
    onnx.save(h.make_model(g, opset_imports=[h.make_opsetid("", opset)]), os.path.join(d, "model.onnx"))
    for i, f in enumerate(feeds):
        np.save(os.path.join(d, f"in{i}.npy"), f)
    np.save(os.path.join(d, "expected.npy"), expected)


def conv2d(x, w, b, stride, pad):
    n, c, hh, ww = x.shape
    o, _, kh, kw = w.shape
    xp = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    oh, ow = (hh + 2 * pad - kh) // stride + 1, (ww + 2 * pad - kw) // stride + 1
    y = np.zeros((n, o, oh, ow))
    for i in range(kh):
        for j in range(kw):
            patch = xp[:, :, i:i + stride * oh:stride, j:j + stride * ow:stride]
            y += np.einsum("nchw,oc->nohw", patch, w[:, :, i, j])
    return y + b[None, :, None, None]


# f16 MatMul: a batch of activations times an f16 weight, shapes off every tile size
a = rng.standard_normal((3, 37, 70)).astype(np.float16)
w = (rng.standard_normal((70, 45)) / 8).astype(np.float16)
save("matmul_f16", [h.make_node("MatMul", ["a", "w"], ["y"], name="mm")], [h.make_tensor_value_info("a", T.FLOAT16, a.shape)],
     [h.make_tensor_value_info("y", T.FLOAT16, [3, 37, 45])], [nh.from_array(w, "w")], [a],
     (a.astype(np.float64) @ w.astype(np.float64)).astype(np.float16))
# f16 MatMul of two activations
b = rng.standard_normal((70, 29)).astype(np.float16)
save("matmul_f16_act", [h.make_node("MatMul", ["a", "b"], ["y"], name="mm")],
     [h.make_tensor_value_info("a", T.FLOAT16, a.shape), h.make_tensor_value_info("b", T.FLOAT16, b.shape)],
     [h.make_tensor_value_info("y", T.FLOAT16, [3, 37, 29])], [], [a, b],
     (a.astype(np.float64) @ b.astype(np.float64)).astype(np.float16))
# f16 Gemm with transB and a bias, then Relu (the converts and the bias fuse around the GEMM)
g_a = rng.standard_normal((9, 130)).astype(np.float16)
g_w = (rng.standard_normal((66, 130)) / 8).astype(np.float16)
g_c = rng.standard_normal(66).astype(np.float16)
ref = (g_a.astype(np.float64) @ g_w.astype(np.float64).T).astype(np.float16).astype(np.float64) + g_c
save("gemm_f16_relu", [h.make_node("Gemm", ["a", "w", "c"], ["t"], transB=1, name="fc"), h.make_node("Relu", ["t"], ["y"], name="relu")],
     [h.make_tensor_value_info("a", T.FLOAT16, g_a.shape)], [h.make_tensor_value_info("y", T.FLOAT16, [9, 66])],
     [nh.from_array(g_w, "w"), nh.from_array(g_c, "c")], [g_a], np.maximum(ref, 0).astype(np.float16))
# f16 Conv 3x3 stride 1 pad 1 with bias, and a strided one
for name, stride in (("conv_f16", 1), ("conv_f16_s2", 2)):
    x = rng.standard_normal((2, 12, 15, 17)).astype(np.float16)
    cw = (rng.standard_normal((20, 12, 3, 3)) / 6).astype(np.float16)
    cb = rng.standard_normal(20).astype(np.float16)
    y = conv2d(x.astype(np.float64), cw.astype(np.float64), np.zeros(20), stride, 1)
    y = y.astype(np.float16).astype(np.float64) + cb[None, :, None, None]  # ONNX Conv's bias: the prims add it after the conv's rounding
    save(name, [h.make_node("Conv", ["x", "w", "b"], ["y"], pads=[1, 1, 1, 1], strides=[stride, stride], name="conv")],
         [h.make_tensor_value_info("x", T.FLOAT16, x.shape)], [h.make_tensor_value_info("y", T.FLOAT16, None)],
         [nh.from_array(cw, "w"), nh.from_array(cb, "b")], [x], y.astype(np.float16))
# f16 Softmax and Gelu: composites computed in f32 and rounded once (frontend/composite.c), as the reference; the
# suite holds these to 1 unit in the last place of f16 (each prim rounded to f16 missed it)
sx = (rng.standard_normal((4, 37, 53)) * 3).astype(np.float16)
e = np.exp(sx.astype(np.float64) - sx.astype(np.float64).max(-1, keepdims=True))
save("softmax_f16", [h.make_node("Softmax", ["x"], ["y"], axis=-1, name="sm")],
     [h.make_tensor_value_info("x", T.FLOAT16, sx.shape)], [h.make_tensor_value_info("y", T.FLOAT16, sx.shape)], [],
     [sx], (e / e.sum(-1, keepdims=True)).astype(np.float16))
gx = (rng.standard_normal((6, 300)) * 2.5).astype(np.float16)
g64 = gx.astype(np.float64)
save("gelu_f16", [h.make_node("Gelu", ["x"], ["y"], name="gelu")],
     [h.make_tensor_value_info("x", T.FLOAT16, gx.shape)], [h.make_tensor_value_info("y", T.FLOAT16, gx.shape)], [],
     [gx], (g64 * 0.5 * (1 + np.vectorize(math.erf)(g64 / math.sqrt(2)))).astype(np.float16), opset=20)
# f16 attention as ViT exports it (Q scaled by a Div before its MatMul with K^T, Softmax, MatMul with V): one fused
# call in f32 (ir/attention.c skips the f16 roundings between the ops), so the reference rounds Q / 4 (its own op)
# and the output, nothing between
aq, ak, av = ((rng.standard_normal((2, 3, 40, 16)) * 1.5).astype(np.float16) for _ in range(3))
qs = (aq.astype(np.float64) / 4).astype(np.float16).astype(np.float64)
sc = qs @ ak.astype(np.float64).transpose(0, 1, 3, 2)
e = np.exp(sc - sc.max(-1, keepdims=True))
save("attention_f16", [h.make_node("Constant", [], ["four"], value=nh.from_array(np.array(4, np.float16)), name="c4"),
                       h.make_node("Div", ["q", "four"], ["qs"], name="scale"),
                       h.make_node("Transpose", ["k"], ["kt"], perm=[0, 1, 3, 2], name="kt"),
                       h.make_node("MatMul", ["qs", "kt"], ["s"], name="qk"),
                       h.make_node("Softmax", ["s"], ["p"], axis=-1, name="sm"),
                       h.make_node("MatMul", ["p", "v"], ["y"], name="pv")],
     [h.make_tensor_value_info(n, T.FLOAT16, aq.shape) for n in "qkv"], [h.make_tensor_value_info("y", T.FLOAT16, aq.shape)],
     [], [aq, ak, av], ((e / e.sum(-1, keepdims=True)) @ av.astype(np.float64)).astype(np.float16))
# the same as GPT-2 exports it: the f16 scores scaled by a Mul and made causal by a Where (-inf above the diagonal)
# between the MatMul and the Softmax, both inside the f32 call
sc = aq.astype(np.float64) @ ak.astype(np.float64).transpose(0, 1, 3, 2) * 0.25
tril = np.tril(np.ones((40, 40), bool))
sc = np.where(tril, sc, -np.inf)
e = np.exp(sc - sc.max(-1, keepdims=True))
save("attention_f16_causal", [h.make_node("Constant", [], ["qtr"], value=nh.from_array(np.array(0.25, np.float16)), name="c"),
                              h.make_node("Constant", [], ["ninf"], value=nh.from_array(np.array(-np.inf, np.float16)), name="ninf"),
                              h.make_node("Transpose", ["k"], ["kt"], perm=[0, 1, 3, 2], name="kt"),
                              h.make_node("MatMul", ["q", "kt"], ["s"], name="qk"),
                              h.make_node("Mul", ["s", "qtr"], ["ss"], name="scale"),
                              h.make_node("Where", ["tril", "ss", "ninf"], ["sm"], name="causal"),
                              h.make_node("Softmax", ["sm"], ["p"], axis=-1, name="sm"),
                              h.make_node("MatMul", ["p", "v"], ["y"], name="pv")],
     [h.make_tensor_value_info(n, T.FLOAT16, aq.shape) for n in "qkv"], [h.make_tensor_value_info("y", T.FLOAT16, aq.shape)],
     [nh.from_array(tril, "tril")], [aq, ak, av], ((e / e.sum(-1, keepdims=True)) @ av.astype(np.float64)).astype(np.float16))
# as BERT exports it in f16: the scores scaled by a Div, then an f16 padding mask [2, 1, 1, 40] added (its last 10
# keys -10000); the call reads the mask widened to f32
am = np.zeros((2, 1, 1, 40), np.float16)
am[..., 30:] = -10000
sc = aq.astype(np.float64) @ ak.astype(np.float64).transpose(0, 1, 3, 2) / 4 + am.astype(np.float64)
e = np.exp(sc - sc.max(-1, keepdims=True))
save("attention_f16_mask", [h.make_node("Constant", [], ["four"], value=nh.from_array(np.array(4, np.float16)), name="c4"),
                            h.make_node("Transpose", ["k"], ["kt"], perm=[0, 1, 3, 2], name="kt"),
                            h.make_node("MatMul", ["q", "kt"], ["s"], name="qk"),
                            h.make_node("Div", ["s", "four"], ["ss"], name="scale"),
                            h.make_node("Add", ["ss", "m"], ["sm"], name="mask"),
                            h.make_node("Softmax", ["sm"], ["p"], axis=-1, name="sm"),
                            h.make_node("MatMul", ["p", "v"], ["y"], name="pv")],
     [h.make_tensor_value_info(n, T.FLOAT16, aq.shape) for n in "qkv"] + [h.make_tensor_value_info("m", T.FLOAT16, am.shape)],
     [h.make_tensor_value_info("y", T.FLOAT16, aq.shape)], [], [aq, ak, av, am],
     ((e / e.sum(-1, keepdims=True)) @ av.astype(np.float64)).astype(np.float16))
# f16 InstanceNormalization: statistics, normalization, scale and bias in f32, rounded once
ix = (rng.standard_normal((2, 5, 7, 9)) * 2 + 1).astype(np.float16)
isc, ib = (rng.standard_normal(5) * 0.5 + 1).astype(np.float16), rng.standard_normal(5).astype(np.float16)
i64 = ix.astype(np.float64)
mu, var = i64.mean((2, 3), keepdims=True), i64.var((2, 3), keepdims=True)
iref = (i64 - mu) / np.sqrt(var + 1e-5) * isc.astype(np.float64)[None, :, None, None] + ib.astype(np.float64)[None, :, None, None]
save("instancenorm_f16", [h.make_node("InstanceNormalization", ["x", "s", "b"], ["y"], epsilon=1e-5, name="in")],
     [h.make_tensor_value_info("x", T.FLOAT16, ix.shape)], [h.make_tensor_value_info("y", T.FLOAT16, ix.shape)],
     [nh.from_array(isc, "s"), nh.from_array(ib, "b")], [ix], iref.astype(np.float16))
# bf16 inside an f32 model: Cast to bf16, MatMul with a bf16 weight, Cast back
xa = rng.standard_normal((33, 90)).astype(np.float32)
wb = bf16_round(rng.standard_normal((90, 40)) / 8)
wt = nh.from_array(wb, "w32")
save("matmul_bf16", [h.make_node("Cast", ["x"], ["xb"], to=T.BFLOAT16, name="in_bf16"),
                     h.make_node("Cast", ["w32"], ["wb"], to=T.BFLOAT16, name="w_bf16"),
                     h.make_node("MatMul", ["xb", "wb"], ["yb"], name="mm"),
                     h.make_node("Cast", ["yb"], ["y"], to=T.FLOAT, name="out_f32")],
     [h.make_tensor_value_info("x", T.FLOAT, xa.shape)], [h.make_tensor_value_info("y", T.FLOAT, [33, 40])], [wt], [xa],
     bf16_round(bf16_round(xa).astype(np.float64) @ wb.astype(np.float64)))
# f64 and the non-2-D f32 conv: contractions run by primc's own GEMMs (runtime/gemm/dgemm.c, primc_sgemm), not
# a BLAS. Gemm with both operands transposed, and a batched MatMul whose K and N pass dgemm's cache blocks
ga = rng.standard_normal((70, 37))
gb = rng.standard_normal((45, 70))
gc = rng.standard_normal(45)
save("gemm_f64_trans", [h.make_node("Gemm", ["a", "b", "c"], ["y"], transA=1, transB=1, name="fc")],
     [h.make_tensor_value_info("a", T.DOUBLE, ga.shape), h.make_tensor_value_info("b", T.DOUBLE, gb.shape)],
     [h.make_tensor_value_info("y", T.DOUBLE, [37, 45])], [nh.from_array(gc, "c")], [ga, gb], ga.T @ gb.T + gc)
ma = rng.standard_normal((3, 37, 300))
mb = rng.standard_normal((300, 130))
save("matmul_f64_blocks", [h.make_node("MatMul", ["a", "b"], ["y"], name="mm")],
     [h.make_tensor_value_info("a", T.DOUBLE, ma.shape), h.make_tensor_value_info("b", T.DOUBLE, mb.shape)],
     [h.make_tensor_value_info("y", T.DOUBLE, [3, 37, 130])], [], [ma, mb], ma @ mb)
x3 = rng.standard_normal((2, 4, 5, 6, 7)).astype(np.float32)
w3 = (rng.standard_normal((6, 4, 3, 3, 3)) / 6).astype(np.float32)
xp = np.pad(x3.astype(np.float64), ((0, 0), (0, 0), (1, 1), (1, 1), (1, 1)))
y3 = np.zeros((2, 6, 5, 6, 7))
for i in range(3):
    for j in range(3):
        for k in range(3):
            y3 += np.einsum("ncdhw,oc->nodhw", xp[:, :, i:i + 5, j:j + 6, k:k + 7], w3[:, :, i, j, k].astype(np.float64))
save("conv3d_f32", [h.make_node("Conv", ["x", "w"], ["y"], pads=[1] * 6, name="conv3d")],
     [h.make_tensor_value_info("x", T.FLOAT, x3.shape)], [h.make_tensor_value_info("y", T.FLOAT, None)],
     [nh.from_array(w3, "w")], [x3], y3.astype(np.float32))
