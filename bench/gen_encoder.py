#!/usr/bin/env python3
# bench/gen_encoder.py: a BERT-style post-norm transformer encoder written straight in ONNX (no torch needed),
# random weights, for timing f32 against --matmul-precision medium/high on models as large as BERT-base.
# Writes OUT/model.onnx and OUT/input.npy (activations [1, seq, d]; the embedding gather is left out).
# Usage: gen_encoder.py OUT [--layers 12 --d 768 --heads 12 --ffn 3072 --seq 128] [--dynamic]
# --dynamic: batch and sequence are dim_params "batch" and "seq" (reshapes copy them with 0), for --dim ranges.
# --embed V: BERT's front as Hugging Face exports it: inputs input_ids and attention_mask (i64 [batch, seq]), word
# embeddings of a V-token vocabulary, position ids from Shape -> Gather -> Range, the mask as (1 - m) * -10000 added
# to the scores; input.npy then holds the ids (the mask is all ones: pass it with --const or a second file).
import argparse
import os

import numpy as np
import onnx
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper as nh


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--layers", type=int, default=12)
    ap.add_argument("--d", type=int, default=768)
    ap.add_argument("--heads", type=int, default=12)
    ap.add_argument("--ffn", type=int, default=3072)
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--dynamic", action="store_true")
    ap.add_argument("--embed", type=int, default=0)
    a = ap.parse_args()
    rng = np.random.default_rng(0)
    d, hd, s = a.d, a.d // a.heads, a.seq
    nodes, inits = [], []

    def const(name, arr):
        inits.append(nh.from_array(np.asarray(arr, np.float32) if arr.dtype != np.int64 else arr, name))
        return name

    def node(op, ins, name, **kw):
        nodes.append(h.make_node(op, ins, [name], name=name, **kw))
        return name

    def linear(x, n_in, n_out, name):
        w = const(name + ".w", rng.standard_normal((n_in, n_out)) / np.sqrt(n_in))
        b = const(name + ".b", rng.standard_normal(n_out) * 0.02)
        return node("Add", [node("MatMul", [x, w], name + ".mm"), b], name)

    def layer_norm(x, name):
        g = const(name + ".g", 1 + 0.1 * rng.standard_normal(d))
        b = const(name + ".b", 0.1 * rng.standard_normal(d))
        return node("LayerNormalization", [x, g, b], name, axis=-1, epsilon=1e-12)

    lead = [0, 0] if a.dynamic else [1, s]
    heads_shape = const("heads_shape", np.array(lead + [a.heads, hd], np.int64))
    flat_shape = const("flat_shape", np.array(lead + [d], np.int64))
    scale = const("scale", np.array(1 / np.sqrt(hd)))
    half, one, rsqrt2 = const("half", np.array(0.5)), const("one", np.array(1.0)), const("rsqrt2", np.array(2 ** -0.5))
    x, mask = "input", None
    if a.embed:
        words = const("word_embeddings", rng.standard_normal((a.embed, d)) * 0.5)
        positions = const("position_embeddings", rng.standard_normal((512, d)) * 0.5)
        one_i, zero_i = const("one_i", np.array(1, np.int64)), const("zero_i", np.array(0, np.int64))
        seq_len = node("Gather", [node("Shape", ["input_ids"], "ids_shape"), one_i], "seq_len", axis=0)
        pos_ids = node("Unsqueeze", [node("Range", [zero_i, seq_len, one_i], "pos_range"),
                                     const("axes0", np.array([0], np.int64))], "pos_ids")
        emb = node("Add", [node("Gather", [words, "input_ids"], "word_emb"), node("Gather", [positions, pos_ids],
                                                                                 "pos_emb")], "emb")
        x = layer_norm(emb, "emb_ln")
        m = node("Cast", [node("Unsqueeze", ["attention_mask", const("axes12", np.array([1, 2], np.int64))],
                               "mask4")], "maskf", to=T.FLOAT)
        mask = node("Mul", [node("Sub", [one, m], "mask_inv"), const("neg_big", np.array(-10000.0))], "mask_add")
    for i in range(a.layers):
        p = f"l{i}"
        q, k, v = (linear(x, d, d, f"{p}.{n}") for n in "qkv")
        qh = node("Transpose", [node("Reshape", [q, heads_shape], p + ".qr")], p + ".qt", perm=[0, 2, 1, 3])
        kh = node("Transpose", [node("Reshape", [k, heads_shape], p + ".kr")], p + ".kt", perm=[0, 2, 3, 1])
        vh = node("Transpose", [node("Reshape", [v, heads_shape], p + ".vr")], p + ".vt", perm=[0, 2, 1, 3])
        scores = node("Mul", [node("MatMul", [qh, kh], p + ".qk"), scale], p + ".sc")
        if mask:
            scores = node("Add", [scores, mask], p + ".masked")
        att = node("Softmax", [scores], p + ".sm", axis=-1)
        ctx = node("Transpose", [node("MatMul", [att, vh], p + ".av")], p + ".ct", perm=[0, 2, 1, 3])
        o = linear(node("Reshape", [ctx, flat_shape], p + ".cr"), d, d, p + ".o")
        x = layer_norm(node("Add", [x, o], p + ".res1"), p + ".ln1")
        f = linear(x, d, a.ffn, p + ".f1")
        erf = node("Erf", [node("Mul", [f, rsqrt2], p + ".f1s")], p + ".erf")
        g = node("Mul", [node("Mul", [f, half], p + ".fh"), node("Add", [erf, one], p + ".e1")], p + ".gelu")
        x = layer_norm(node("Add", [x, linear(g, a.ffn, d, p + ".f2")], p + ".res2"), p + ".ln2")
    nodes.append(h.make_node("Identity", [x], ["output"], name="output"))
    io_shape = ["batch", "seq", d] if a.dynamic else [1, s, d]
    inputs = [h.make_tensor_value_info("input", T.FLOAT, io_shape)]
    if a.embed:
        inputs = [h.make_tensor_value_info(n, T.INT64, io_shape[:2]) for n in ("input_ids", "attention_mask")]
    graph = h.make_graph(nodes, "encoder", inputs, [h.make_tensor_value_info("output", T.FLOAT, io_shape)], inits)
    os.makedirs(a.out, exist_ok=True)
    onnx.save(h.make_model(graph, opset_imports=[h.make_opsetid("", 17)]), os.path.join(a.out, "model.onnx"))
    if a.embed:
        np.save(os.path.join(a.out, "input.npy"), rng.integers(0, a.embed, (1, s)).astype(np.int64))
    else:
        np.save(os.path.join(a.out, "input.npy"), rng.standard_normal((1, s, d)).astype(np.float32))


if __name__ == "__main__":
    main()
