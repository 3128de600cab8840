#!/usr/bin/env python3
# tests/ref/gen_matmul_precision.py: an f32 model for --matmul-precision (issue 20) with a float64 numpy reference:
# MatMuls on constant weights (packed at compile time), a Gemm with transB (a transposed constant), and a large
# product of two activations (its B packed on every call). Writes OUT/{model.onnx, in0.npy, in1.npy, ref0.npy ...}
# and, for --autocast fp16, f16_ref0.npy ...: the same in float64 on operands rounded to f16 where a contraction has
# a weight (torch.autocast's fp16 products with f32 sums; the product of two activations stays f32). OUT/cnn/ and
# OUT/bneck/ are CNN classifiers for --autocast bf16.
# Usage: gen_matmul_precision.py OUT
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper as nh

out = sys.argv[1]
os.makedirs(out, exist_ok=True)
rng = np.random.default_rng(7)
x = rng.standard_normal((2, 40, 300)).astype(np.float32)
u = rng.standard_normal((1, 256, 128)).astype(np.float32)
w1 = (rng.standard_normal((300, 200)) / 17).astype(np.float32)
b1 = rng.standard_normal(200).astype(np.float32)
w2 = (rng.standard_normal((200, 70)) / 14).astype(np.float32)
w3 = (rng.standard_normal((64, 300)) / 17).astype(np.float32)  # Gemm's B, transposed
c3 = rng.standard_normal(64).astype(np.float32)
shape = np.array([80, 300], np.int64)
nodes = [
    h.make_node("MatMul", ["x", "w1"], ["t"], name="fc1"),
    h.make_node("Add", ["t", "b1"], ["a"], name="bias1"),
    h.make_node("Relu", ["a"], ["r"], name="relu"),
    h.make_node("MatMul", ["r", "w2"], ["y"], name="fc2"),
    h.make_node("Reshape", ["x", "shape"], ["x2"], name="flat"),
    h.make_node("Gemm", ["x2", "w3", "c3"], ["g"], transB=1, name="gemm"),
    h.make_node("Transpose", ["u"], ["ut"], perm=[0, 2, 1], name="ut"),
    h.make_node("MatMul", ["u", "ut"], ["s"], name="gram"),
]
inits = [nh.from_array(v, n) for n, v in (("w1", w1), ("b1", b1), ("w2", w2), ("w3", w3), ("c3", c3), ("shape", shape))]
g = h.make_graph(nodes, "matmul_precision",
                 [h.make_tensor_value_info("x", T.FLOAT, x.shape), h.make_tensor_value_info("u", T.FLOAT, u.shape)],
                 [h.make_tensor_value_info(n, T.FLOAT, None) for n in ("y", "g", "s")], inits)
onnx.save(h.make_model(g, opset_imports=[h.make_opsetid("", 17)]), os.path.join(out, "model.onnx"))
np.save(os.path.join(out, "in0.npy"), x)
np.save(os.path.join(out, "in1.npy"), u)
xd, ud = x.astype(np.float64), u.astype(np.float64)
r = np.maximum(xd @ w1 + b1, 0)
np.save(os.path.join(out, "ref0.npy"), r @ w2)
np.save(os.path.join(out, "ref1.npy"), xd.reshape(80, 300) @ w3.astype(np.float64).T + c3)
np.save(os.path.join(out, "ref2.npy"), ud @ ud.transpose(0, 2, 1))


def f16(v):
    """float64 of v rounded to float16 (round to nearest even, as a convert)"""
    return np.asarray(v).astype(np.float16).astype(np.float64)


r16 = np.maximum(f16(xd) @ f16(w1) + b1, 0)
np.save(os.path.join(out, "f16_ref0.npy"), f16(r16) @ f16(w2))
np.save(os.path.join(out, "f16_ref1.npy"), f16(xd.reshape(80, 300)) @ f16(w3).T + c3)
np.save(os.path.join(out, "f16_ref2.npy"), ud @ ud.transpose(0, 2, 1))

# --autocast bf16: a batch of 200 images through a conv the bf16 row takes (128 -> 128 channels, 3x3: deep sums into
# many channels), one it leaves f32 (8 -> 128), global average pool and a classifier Gemm; OUT/cnn/.
cnn = os.path.join(out, "cnn")
x = rng.standard_normal((200, 8, 10, 10)).astype(np.float32)
k1 = (rng.standard_normal((128, 8, 3, 3)) / np.sqrt(72)).astype(np.float32)
c1 = (0.1 * rng.standard_normal(128)).astype(np.float32)
k2 = (rng.standard_normal((128, 128, 3, 3)) / np.sqrt(1152)).astype(np.float32)
c2 = (0.1 * rng.standard_normal(128)).astype(np.float32)
wf = (rng.standard_normal((10, 128)) / np.sqrt(128)).astype(np.float32)
bf = (0.1 * rng.standard_normal(10)).astype(np.float32)


def conv3x3(v, k, b):
    """same-padded 3x3 conv in float64, by shifted slices (no code under test)"""
    vp = np.pad(v, ((0, 0), (0, 0), (1, 1), (1, 1)))
    y = np.zeros((v.shape[0], k.shape[0], v.shape[2], v.shape[3]))
    for i in range(3):
        for j in range(3):
            y += np.einsum("nchw,oc->nohw", vp[:, :, i:i + v.shape[2], j:j + v.shape[3]], k[:, :, i, j])
    return y + b[None, :, None, None]


def classifier(feat, w):
    """global average pool of feat, then the classifier Gemm (w, bf) into logits"""
    return [h.make_node("GlobalAveragePool", [feat], ["gap"], name="gap"),
            h.make_node("Flatten", ["gap"], ["flat"], name="flat"),
            h.make_node("Gemm", ["flat", w, "bf"], ["logits"], transB=1, name="fc")]


def save_cnn(d, nodes, inits, x, ref):
    """the graph of nodes (input x, output logits; inits (name, value) pairs) as d/model.onnx, x as d/in0.npy and the
    float64 logits as d/ref0.npy"""
    os.makedirs(d, exist_ok=True)
    g = h.make_graph(nodes, os.path.basename(d), [h.make_tensor_value_info("x", T.FLOAT, x.shape)],
                     [h.make_tensor_value_info("logits", T.FLOAT, None)], [nh.from_array(v, n) for n, v in inits])
    onnx.save(h.make_model(g, opset_imports=[h.make_opsetid("", 17)]), os.path.join(d, "model.onnx"))
    np.save(os.path.join(d, "in0.npy"), x)
    np.save(os.path.join(d, "ref0.npy"), ref)


nodes = [
    h.make_node("Conv", ["x", "k1", "c1"], ["t1"], pads=[1] * 4, name="conv_narrow"),
    h.make_node("Relu", ["t1"], ["r1"], name="relu1"),
    h.make_node("Conv", ["r1", "k2", "c2"], ["t2"], pads=[1] * 4, name="conv_deep"),
    h.make_node("Relu", ["t2"], ["r2"], name="relu2"),
] + classifier("r2", "wf")
r1 = np.maximum(conv3x3(x.astype(np.float64), k1, c1), 0)
r2 = np.maximum(conv3x3(r1, k2, c2), 0)
save_cnn(cnn, nodes, (("k1", k1), ("c1", c1), ("k2", k2), ("c2", c2), ("wf", wf), ("bf", bf)), x,
         r2.mean(axis=(2, 3)) @ wf.astype(np.float64).T + bf)
r1 = np.maximum(conv3x3(f16(x), f16(k1), c1), 0)
r2 = np.maximum(conv3x3(f16(r1), f16(k2), c2), 0)
np.save(os.path.join(cnn, "f16_ref0.npy"), f16(r2.mean(axis=(2, 3))) @ f16(wf).T + bf)


# --autocast bf16 on a bottleneck block (ResNet-50's shape, small): 3x3 64 -> 64, 1x1 64 -> 128 whose result feeds
# a 1x1 and that 1x1's residual, 1x1 128 -> 128 + residual, ReLUs, global average pool, classifier; OUT/bneck/. The maps
# the 1x1s read stay bf16 channel pairs between the convs (codegen/kir_pairs.c).
x = rng.standard_normal((64, 64, 14, 14)).astype(np.float32)
ka = (rng.standard_normal((64, 64, 3, 3)) / np.sqrt(576)).astype(np.float32)
kb = (rng.standard_normal((128, 64, 1, 1)) / np.sqrt(64)).astype(np.float32)
kc = (rng.standard_normal((128, 128, 1, 1)) / np.sqrt(128)).astype(np.float32)
kd = (rng.standard_normal((128, 128, 1, 1)) / np.sqrt(128)).astype(np.float32)
ca, cb, cc, cd = ((0.1 * rng.standard_normal(n)).astype(np.float32) for n in (64, 128, 128, 128))
wf = (rng.standard_normal((10, 128)) / np.sqrt(128)).astype(np.float32)
bf = (0.1 * rng.standard_normal(10)).astype(np.float32)
# the 3x3 and the two 1x1s both models share
trunk = [
    h.make_node("Conv", ["x", "ka", "ca"], ["t1"], pads=[1] * 4, name="conv3x3"),
    h.make_node("Relu", ["t1"], ["r1"], name="relu1"),
    h.make_node("Conv", ["r1", "kb", "cb"], ["t2"], name="widen"),
    h.make_node("Relu", ["t2"], ["r2"], name="relu2"),
    h.make_node("Conv", ["r2", "kc", "cc"], ["t3"], name="mix"),
    h.make_node("Relu", ["t3"], ["r3"], name="relu3"),
]
trunk_inits = (("ka", ka), ("ca", ca), ("kb", kb), ("cb", cb), ("kc", kc), ("cc", cc))
nodes = trunk + [
    h.make_node("Conv", ["r3", "kd", "cd"], ["t4"], name="project"),
    h.make_node("Add", ["t4", "r2"], ["s4"], name="residual"),
    h.make_node("Relu", ["s4"], ["r4"], name="relu4"),
] + classifier("r4", "wf")


def conv1x1(v, k, b):
    return np.einsum("nchw,oc->nohw", v, k[:, :, 0, 0].astype(np.float64)) + b[None, :, None, None]


r1 = np.maximum(conv3x3(x.astype(np.float64), ka, ca), 0)
r2 = np.maximum(conv1x1(r1, kb, cb), 0)
r3 = np.maximum(conv1x1(r2, kc, cc), 0)
r4 = np.maximum(conv1x1(r3, kd, cd) + r2, 0)
save_cnn(os.path.join(out, "bneck"), nodes, trunk_inits + (("kd", kd), ("cd", cd), ("wf", wf), ("bf", bf)), x,
         r4.mean(axis=(2, 3)) @ wf.astype(np.float64).T + bf)

# the same convs where a max pool reads the map between the two 1x1s as well: a kernel other than a conv touches it,
# so it stays f32 (the conv writing it keeps an f32 y, the 1x1 reading it an f32 x); OUT/bneck_pool/
wp = (rng.standard_normal((10, 256)) / np.sqrt(256)).astype(np.float32)
nodes = trunk + [
    h.make_node("MaxPool", ["r2"], ["mp"], kernel_shape=[3, 3], pads=[1] * 4, name="pool"),
    h.make_node("Concat", ["r3", "mp"], ["cat"], axis=1, name="cat"),
] + classifier("cat", "wp")
rp = np.pad(r2, ((0, 0), (0, 0), (1, 1), (1, 1)), constant_values=-np.inf)
mp = np.max([rp[:, :, i:i + 14, j:j + 14] for i in range(3) for j in range(3)], axis=0)
cat = np.concatenate([r3, mp], axis=1)
save_cnn(os.path.join(out, "bneck_pool"), nodes, trunk_inits + (("wp", wp), ("bf", bf)), x,
         cat.mean(axis=(2, 3)) @ wp.astype(np.float64).T + bf)
