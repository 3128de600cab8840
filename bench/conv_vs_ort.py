#!/usr/bin/env python3
# bench/conv_vs_ort.py: each distinct Conv of an ONNX model against ONNX Runtime, one conv at a time, on 1 thread.
# Every distinct (input shape, weight shape, strides, pads, dilations, group) becomes a model of its own (that Conv
# with a bias and a Relu, random weights), compiled by primc with --emit lib and loaded through ctypes; primc's call
# and ONNX Runtime's session run in turn in this process, round after round, so that a VM whose speed moves between
# minutes moves both alike. Per conv: the least time of each, their ratio, and the median of the per-round ratios
# (paired), the count of that conv in the model, and the output's error against ONNX Runtime's. Only 1 thread: at 2,
# ONNX Runtime's pool threads spin after each of its runs on the cores primc's threads then need.
# ONNX Runtime's figures include its NCHW -> NCHWc reorders around each lone conv, which a whole model mostly avoids.
# Usage: taskset -c 1 python3 bench/conv_vs_ort.py [--primc build/primc] [--rounds 20] MODEL.onnx
import argparse
import ctypes
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper, shape_inference

ap = argparse.ArgumentParser()
ap.add_argument("model")
ap.add_argument("--primc", default="build/primc")
ap.add_argument("--rounds", type=int, default=20)
a = ap.parse_args()
if os.environ.get("PRIMC_NUM_THREADS", "1") != "1":
    sys.exit("conv_vs_ort.py: 1 thread only (ONNX Runtime's spinning pool would take primc's cores)")
os.environ["PRIMC_NUM_THREADS"] = "1"

m = shape_inference.infer_shapes(onnx.load(a.model))
dims = {v.name: [d.dim_value for d in v.type.tensor_type.shape.dim] for v in list(m.graph.value_info) + list(m.graph.input)}
inits = {i.name: i for i in m.graph.initializer}
convs = {}  # key -> [attrs, x shape, w shape, count]
for n in m.graph.node:
    if n.op_type != "Conv" or n.input[1] not in inits or not all(dims.get(n.input[0], [0])):
        continue
    attrs = {t.name: helper.get_attribute_value(t) for t in n.attribute}
    w = list(inits[n.input[1]].dims)
    key = (tuple(dims[n.input[0]]), tuple(w), repr(sorted(attrs.items())))
    convs.setdefault(key, [attrs, dims[n.input[0]], w, 0])[3] += 1

rng = np.random.default_rng(0)
work = tempfile.mkdtemp(prefix="conv_vs_ort_")
so1 = ort.SessionOptions()
so1.intra_op_num_threads = so1.inter_op_num_threads = 1
print("%-44s %5s %9s %9s %6s %6s %8s" % ("conv (C x H x W -> O, k, stride, group)", "count", "primc ms", "ORT ms", "ratio", "paired", "error"))
tot_p = tot_o = 0.0
for i, (attrs, xs, ws, count) in enumerate(convs.values()):
    name = "c%d" % i
    x = rng.standard_normal(xs).astype(np.float32)
    w = (rng.standard_normal(ws) * (2.0 / np.prod(ws[1:])) ** 0.5).astype(np.float32)
    g = helper.make_graph(
        [helper.make_node("Conv", ["x", "w", "b"], ["t"], **attrs), helper.make_node("Relu", ["t"], ["y"])], name,
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, xs)], [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [numpy_helper.from_array(w, "w"), numpy_helper.from_array(rng.standard_normal(ws[0]).astype(np.float32) * 0.1, "b")])
    mm = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    mm.ir_version = 8
    path = os.path.join(work, name + ".onnx")
    onnx.save(mm, path)
    lib = os.path.join(work, "lib%s.so" % name)
    subprocess.run([a.primc, "compile", path, "--emit", "lib", "-o", lib, "--name", name, "-q"], check=True)
    so = ctypes.CDLL(lib)
    ws_floats = ctypes.c_int64.in_dll(so, name + "_workspace_size").value // 4 + 16
    wsp = np.zeros(ws_floats, np.float32)
    wptr = ctypes.c_void_p(wsp.ctypes.data + (-wsp.ctypes.data) % 64)
    s = ort.InferenceSession(path, so1, providers=["CPUExecutionProvider"])
    ref = s.run(None, {"x": x})[0]
    y = np.zeros(ref.shape, np.float32)
    ins, outs, run = (ctypes.c_void_p * 1)(x.ctypes.data), (ctypes.c_void_p * 1)(y.ctypes.data), getattr(so, name + "_run")

    def t_primc():
        t = time.perf_counter()
        if run(ins, outs, wptr) != 0:
            sys.exit("conv_vs_ort.py: %s_run failed" % name)
        return time.perf_counter() - t

    def t_ort():
        t = time.perf_counter()
        s.run(None, {"x": x})
        return time.perf_counter() - t

    t_primc(), t_ort()
    err = float(np.abs(y - ref).max() / (np.abs(ref).max() + 1e-30))
    P, O = [], []
    for r in range(a.rounds):
        P.append(min(t_primc() for _ in range(3)))
        O.append(min(t_ort() for _ in range(3)))
    tot_p += count * statistics.median(P)
    tot_o += count * statistics.median(O)
    st, k = attrs.get("strides", [1])[0], ws[2] if len(ws) > 2 else 1
    label = "%d x %s -> %d, k%d, s%d, g%d" % (xs[1], "x".join(map(str, xs[2:])), ws[0], k, st, attrs.get("group", 1))
    print("%-44s %5d %9.3f %9.3f %6.2f %6.2f %8.1e" % (label, count, min(P) * 1e3, min(O) * 1e3, min(P) / min(O),
                                                      statistics.median(p / o for p, o in zip(P, O)), err), flush=True)
print("all convs, each by its count, sum of medians: primc %.2f ms, ONNX Runtime %.2f ms" % (tot_p * 1e3, tot_o * 1e3))
shutil.rmtree(work, ignore_errors=True)
