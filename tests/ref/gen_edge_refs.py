#!/usr/bin/env python3
# tests/ref/gen_edge_refs.py: writes ONNX models of edge cases that mutation testing found untested, with numpy
# references, to tests/data/onnx_edge/<case>/ (model.onnx, input_0.pb, output_K.pb); tests/unit/test_edge_refs.c runs
# them on the interpreter and compiled. Each reference is numpy's own slicing or argmax, written out independently of
# the ONNX op, and onnxruntime must agree with it before a case is written.
#   slice_neg_step_*: Slice with negative steps whose end runs past the start of the axis (INT64_MIN, -len-1, -big),
#     where a wrong end clamp drops or repeats the first element;
#   argmax_ties_* / argmin_ties_*: rows with tied extremes, first index (select_last_index=0) and last index (=1),
#     on float and int inputs, along inner and outer axes;
#   maxpool_*: growing stride-1 pools (SPP) and strided pools without pads.
import os
import shutil
import sys

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

OUT = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "data", "onnx_edge")
I64_MIN = -(2**63)
I64_MAX = 2**63 - 1


def write(name, nodes, x, inits, refs):
    outs = [f"y{i}" for i in range(len(refs))]
    g = helper.make_graph(nodes, name, [helper.make_tensor_value_info("x", helper.np_dtype_to_tensor_dtype(x.dtype), x.shape)],
                          [helper.make_tensor_value_info(o, helper.np_dtype_to_tensor_dtype(r.dtype), r.shape)
                           for o, r in zip(outs, refs)],
                          [numpy_helper.from_array(v, k) for k, v in inits.items()])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    onnx.checker.check_model(m)
    got = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})
    for o, r, a in zip(outs, refs, got):
        assert a.dtype == r.dtype and a.shape == r.shape and np.array_equal(a, r), f"{name} {o}: onnxruntime {a} numpy {r}"
    d = os.path.join(OUT, name)
    shutil.rmtree(d, ignore_errors=True)  # a case rewritten with fewer outputs left its old output_K.pb behind
    os.makedirs(d)
    onnx.save(m, os.path.join(d, "model.onnx"))
    with open(os.path.join(d, "input_0.pb"), "wb") as f:
        f.write(numpy_helper.from_array(x, "x").SerializeToString())
    for i, r in enumerate(refs):
        with open(os.path.join(d, f"output_{i}.pb"), "wb") as f:
            f.write(numpy_helper.from_array(r, f"y{i}").SerializeToString())
    print("wrote", name)


def slices():
    x = np.arange(5 * 6, dtype=np.float32).reshape(5, 6) * 1.5 - 7
    # (starts, ends, axes, steps, numpy reference)
    specs = [
        ([-1], [I64_MIN], [1], [-1], x[:, ::-1]),
        ([4], [-7], [1], [-2], x[:, 4::-2]),               # end -len-1: runs through index 0
        ([I64_MAX], [I64_MIN], [0], [-3], x[::-3]),         # start past the end clamps to the last index
        ([-2, 5], [I64_MIN, -100], [0, 1], [-1, -2], x[-2::-1, 5::-2]),
        ([2], [-6], [1], [-1], x[:, 2:0:-1]),               # end -len: stops before index 0
        ([3], [I64_MIN], [-2], [-1], x[3::-1]),             # negative axis
    ]
    nodes, inits, refs = [], {}, []
    for i, (s, e, a, st, ref) in enumerate(specs):
        for k, v in (("s", s), ("e", e), ("a", a), ("t", st)):
            inits[f"{k}{i}"] = np.array(v, dtype=np.int64)
        nodes.append(helper.make_node("Slice", ["x", f"s{i}", f"e{i}", f"a{i}", f"t{i}"], [f"y{i}"], name=f"slice{i}"))
        refs.append(np.ascontiguousarray(ref))
    write("slice_neg_step_to_start", nodes, x, inits, refs)


def first_arg(x, axis, pick):
    """the index of the first extreme along axis, by a plain loop: no numpy arg* involved"""
    xt = np.moveaxis(x, axis, -1)
    out = np.zeros(xt.shape[:-1], dtype=np.int64)
    for idx in np.ndindex(*xt.shape[:-1]):
        row = xt[idx]
        best = 0
        for j in range(1, len(row)):
            if pick(row[j], row[best]):
                best = j
        out[idx] = best
    return np.expand_dims(out, axis)


def args(name, x):
    nodes, refs = [], []
    n = 0
    for op, strict, loose in (("ArgMax", lambda a, b: a > b, lambda a, b: a >= b),
                              ("ArgMin", lambda a, b: a < b, lambda a, b: a <= b)):
        for axis in range(x.ndim):
            for last in (0, 1):
                nodes.append(helper.make_node(op, ["x"], [f"y{n}"], name=f"{op}{n}", axis=axis, keepdims=1,
                                              select_last_index=last))
                ref = first_arg(x, axis, loose if last else strict)
                numpy_ref = (np.argmax if op == "ArgMax" else np.argmin)(np.flip(x, axis) if last else x, axis=axis)
                if last:
                    numpy_ref = x.shape[axis] - 1 - numpy_ref
                assert np.array_equal(ref, np.expand_dims(numpy_ref, axis)), f"{name} {op} axis {axis} last {last}"
                refs.append(ref)
                n += 1
    write(name, nodes, x, {}, refs)


def max_pool_same(x, k):
    """stride-1 max pool over the last two dims, windows centred, -inf outside (numpy)"""
    kh, kw = k
    p = np.pad(x, ((0, 0), (0, 0), (kh // 2, kh // 2), (kw // 2, kw // 2)), constant_values=-np.inf)
    out = np.full(x.shape, -np.inf, x.dtype)
    for i in range(kh):
        for j in range(kw):
            out = np.maximum(out, p[:, :, i:i + x.shape[2], j:j + x.shape[3]])
    return out


def pools():
    """max pools of one map whose windows grow (YOLO's SPP, and unequal kernels): the importer builds each bigger
    one from the smaller one's result (pool_a o pool_b = pool_(a+b-1)), which must equal the direct pool; a pool
    met twice is built once"""
    rng = np.random.default_rng(11)
    x = rng.standard_normal((1, 3, 9, 8)).astype(np.float32)
    x[0, 1, 4, 4] = np.inf
    for name, ks in (("maxpool_spp_5_9_13", [(5, 5), (9, 9), (13, 13), (5, 5)]),
                     ("maxpool_growing_unequal", [(3, 5), (7, 5), (7, 9), (1, 1)])):
        nodes = [helper.make_node("MaxPool", ["x"], [f"y{i}"], kernel_shape=list(k), strides=[1, 1],
                                  pads=[k[0] // 2, k[1] // 2, k[0] // 2, k[1] // 2]) for i, k in enumerate(ks)]
        write(name, nodes, x, {}, [max_pool_same(x, k) for k in ks])


def max_pool_valid(x, k, s):
    """max pool over the last two dims without padding, windows k at strides s (numpy)"""
    (kh, kw), (sh, sw) = k, s
    oh, ow = (x.shape[2] - kh) // sh + 1, (x.shape[3] - kw) // sw + 1
    out = np.full(x.shape[:2] + (oh, ow), np.iinfo(x.dtype).min if x.dtype.kind in "iu" else -np.inf, x.dtype)
    for i in range(kh):
        for j in range(kw):
            out = np.maximum(out, x[:, :, i:i + sh * (oh - 1) + 1:sh, j:j + sw * (ow - 1) + 1:sw])
    return out


def unpadded_pools():
    """strided max pools without pads (SqueezeNet's 3x3/2, exact under ceil_mode): codegen turns them into calls
    that read the map in place; rows and outputs wider than a vector with tails, and narrower than one"""
    rng = np.random.default_rng(12)
    for name, shape, specs in (
            ("maxpool_unpadded_strided", (1, 3, 23, 37),
             [((3, 3), (2, 2), 0), ((3, 2), (2, 1), 0), ((5, 5), (3, 3), 0), ((2, 2), (2, 2), 0), ((1, 3), (1, 2), 0)]),
            ("maxpool_unpadded_narrow", (2, 2, 9, 7), [((3, 3), (2, 2), 1), ((3, 2), (2, 2), 0), ((2, 2), (2, 2), 0)])):
        x = rng.standard_normal(shape).astype(np.float32)
        x[0, 1, 4, 5], x[-1, 0, 2, 6], x[0, 0, 0, 0] = np.inf, -np.inf, 50.0
        nodes = [helper.make_node("MaxPool", ["x"], [f"y{i}"], kernel_shape=list(k), strides=list(st), ceil_mode=c)
                 for i, (k, st, c) in enumerate(specs)]
        write(name, nodes, x, {}, [max_pool_valid(x, k, st) for k, st, _ in specs])


def u8_pools():
    """strided max pools on uint8 (QOperator's MaxPool; the QDQ form's after the qdq pass): calls on the u8 map,
    padded (the pad is the u8 minimum, 0, as ONNX Runtime's) and not, rows past 64 bytes"""
    rng = np.random.default_rng(13)
    x = rng.integers(0, 256, (2, 3, 21, 70), dtype=np.uint8)
    specs = [((3, 3), (2, 2), 1), ((3, 3), (2, 2), 0), ((2, 2), (2, 2), 0)]
    nodes = [helper.make_node("MaxPool", ["x"], [f"y{i}"], kernel_shape=list(k), strides=list(st), pads=[p] * 4)
             for i, (k, st, p) in enumerate(specs)]
    refs = [max_pool_valid(np.pad(x, ((0, 0), (0, 0), (p, p), (p, p))), k, st) for k, st, p in specs]
    write("maxpool_u8_strided", nodes, x, {}, refs)


def main():
    slices()
    # ties everywhere: a row of equal values, maxima and minima tied at both ends and in the middle, 19 columns so
    # the compiled loop has a vector body and a tail
    xf = np.array([[1, 3, 3, 0, 3, -2, 3, 1, 0, -2, 2, 3, -2, 1, 0, 0, 3, -2, 1],
                   [5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5],
                   [-4, 2, -4, 2, 0, 1, 2, -4, 0, 0, 1, -4, 2, 1, 0, 0, 1, 2, -4],
                   [7, 0, 1, 2, 3, 4, 5, 6, -1, 0, 1, 2, 3, 4, 5, 6, 7, -1, -1]], dtype=np.float32)
    args("argmax_ties_f32", xf)
    args("argmax_ties_i32", xf.astype(np.int32))
    pools()
    unpadded_pools()
    u8_pools()


if __name__ == "__main__":
    main()
