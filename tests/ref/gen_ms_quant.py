#!/usr/bin/env python3
# tests/ref/gen_ms_quant.py: ONNX Runtime's com.microsoft quantized ops (issue 20): one small model per op
# (QLinearAdd, QLinearMul, QLinearConcat, QLinearGlobalAveragePool, QLinearAveragePool, QLinearSigmoid, QLinearSoftmax,
# QLinearLeakyRelu, QGemm, a channels-last QLinearConv, com.microsoft Quantize/DequantizeLinear), and the committed
# zoo models (models/resnet_tiny, mlp, yolo_tiny) through onnxruntime.quantization.quantize_static in QOperator
# format (QLinearConv, QLinearAdd, QLinearGlobalAveragePool, QGemm, QLinearMul, QLinearConcat, QLinearSigmoid), and
# resnet_tiny through quantize_dynamic (ConvInteger with DynamicQuantizeLinear's run-time zero points), the zoo's lstm and
# a bidirectional LSTM through quantize_dynamic (com.microsoft DynamicQuantizeLSTM).
# ONNX Runtime's (CPU) outputs are the references, its integer contractions on its exact u8 x u8 path
# (tests/ref/ort_exact.py). Writes OUT/<name>/: model.onnx, in*.npy, ref0.npy and tol.txt,
# "exact" (equal to ONNX Runtime's output) or "step S" (within S, one quantization step of the output, on >= 99%
# of the elements). OUT/bad/ is a QLinearAdd without its C_scale (model.onnx and in0.npy, no reference).
# Usage: gen_ms_quant.py OUT [MODELS_DIR]
import os
import sys
import tempfile

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper as nh
from ort_exact import unsaturated

out = sys.argv[1]
models = sys.argv[2] if len(sys.argv) > 2 else "models"
rng = np.random.default_rng(20)
MS = h.make_opsetid("com.microsoft", 1)
ONNX_T = {np.uint8: T.UINT8, np.int8: T.INT8, np.float32: T.FLOAT, np.int32: T.INT32}


def session(model):
    return ort.InferenceSession(unsaturated(model).SerializeToString(), providers=["CPUExecutionProvider"])


def save(name, model, feeds, tol):
    d = os.path.join(out, name)
    os.makedirs(d, exist_ok=True)
    onnx.save(model, os.path.join(d, "model.onnx"))
    s = session(model)
    names = [i.name for i in s.get_inputs()]
    ref = s.run(None, dict(zip(names, feeds)))[0]
    for i, f in enumerate(feeds):
        np.save(os.path.join(d, f"in{i}.npy"), f)
    np.save(os.path.join(d, "ref0.npy"), ref)
    with open(os.path.join(d, "tol.txt"), "w") as f:
        f.write(tol + "\n")


def q(shape, dt):
    info = np.iinfo(dt)
    return rng.integers(info.min, info.max + 1, shape, dtype=dt)


def c(name, v):
    return nh.from_array(np.array(v), name)


def op_model(name, node, inputs, out_type, inits, feeds, tol="exact"):
    """one com.microsoft node; inputs: (name, array) fed at run time"""
    vi = [h.make_tensor_value_info(n, ONNX_T[a.dtype.type], a.shape) for n, a in inputs]
    g = h.make_graph([node], name, vi, [h.make_tensor_value_info(node.output[0], out_type, None)], inits)
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 17), MS])
    save(name, m, feeds, tol)


def qparams(prefix, dt, scale, zp):
    return [c(prefix + "_s", np.float32(scale)), c(prefix + "_z", dt(zp))]


# QLinearAdd / QLinearMul: broadcasting operands, every zero point given, and C's zero point left out
for opn in ["QLinearAdd", "QLinearMul"]:
    for dt, zps in [(np.uint8, (131, 120, 128)), (np.int8, (-3, 5, None))]:
        a, b = q((2, 3, 8, 8), dt), q((3, 1, 1), dt)
        inits = qparams("a", dt, 0.043, zps[0]) + qparams("b", dt, 0.0217, zps[1]) + [c("c_s", np.float32(0.061 if opn == "QLinearAdd" else 0.29))]
        ins = ["a", "a_s", "a_z", "b", "b_s", "b_z", "c_s"]
        if zps[2] is not None:
            inits.append(c("c_z", dt(zps[2])))
            ins.append("c_z")
        node = h.make_node(opn, ins, ["y"], domain="com.microsoft", name=opn.lower())
        op_model(f"{opn.lower()}_{dt.__name__}", node, [("a", a), ("b", b)], ONNX_T[dt], inits, [a, b])

# a QLinearAdd without its C_scale (input 6 given as ""): refused, naming the node (ONNX Runtime refuses it too)
a = q((2, 3), np.uint8)
node = h.make_node("QLinearAdd", ["a", "a_s", "a_z", "a", "a_s", "a_z", "", "a_z"], ["y"], domain="com.microsoft", name="add_no_c_scale")
g = h.make_graph([node], "bad", [h.make_tensor_value_info("a", T.UINT8, a.shape)], [h.make_tensor_value_info("y", T.UINT8, None)],
                 qparams("a", np.uint8, 0.1, 128))
os.makedirs(os.path.join(out, "bad"), exist_ok=True)
onnx.save(h.make_model(g, opset_imports=[h.make_opsetid("", 17), MS]), os.path.join(out, "bad", "model.onnx"))
np.save(os.path.join(out, "bad", "in0.npy"), a)

# QLinearConcat along the channels: three inputs, the second sharing Y's scale and zero point
dt = np.uint8
xs = [q((1, 2, 5, 5), dt), q((1, 3, 5, 5), dt), q((1, 1, 5, 5), dt)]
inits = qparams("y", dt, 0.05, 128) + qparams("x0", dt, 0.031, 100) + qparams("x2", dt, 0.09, 140)
node = h.make_node("QLinearConcat", ["y_s", "y_z", "x0", "x0_s", "x0_z", "x1", "y_s", "y_z", "x2", "x2_s", "x2_z"],
                   ["y"], axis=1, domain="com.microsoft", name="qlconcat")
op_model("qlinearconcat", node, [(f"x{i}", x) for i, x in enumerate(xs)], T.UINT8, inits, xs)

# QLinearGlobalAveragePool, NCHW (u8) and channels last (i8)
for dt, cl, shape in [(np.uint8, 0, (2, 8, 7, 7)), (np.int8, 1, (2, 5, 5, 8))]:
    x = q(shape, dt)
    inits = qparams("x", dt, 0.07, 3 if dt == np.int8 else 130) + qparams("y", dt, 0.011, -2 if dt == np.int8 else 125)
    node = h.make_node("QLinearGlobalAveragePool", ["x", "x_s", "x_z", "y_s", "y_z"], ["y"], channels_last=cl,
                       domain="com.microsoft", name="qlgap")
    op_model(f"qlineargap_{dt.__name__}", node, [("x", x)], ONNX_T[dt], inits, [x])

# QLinearAveragePool: padded 3x3 stride 2 without and with the pads counted; channels last; float sums in another
# order than ONNX Runtime's, so within a step
for name, dt, kw, shape in [
        ("qlinearavgpool", np.uint8, dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]), (1, 4, 9, 9)),
        ("qlinearavgpool_pad", np.int8, dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1], count_include_pad=1), (1, 4, 9, 9)),
        ("qlinearavgpool_nhwc", np.uint8, dict(kernel_shape=[2, 2], strides=[2, 2], channels_last=1), (2, 8, 8, 6))]:
    x = q(shape, dt)
    inits = qparams("x", dt, 0.05, 7 if dt == np.int8 else 120) + qparams("y", dt, 0.04, 0 if dt == np.int8 else 125)
    node = h.make_node("QLinearAveragePool", ["x", "x_s", "x_z", "y_s", "y_z"], ["y"], domain="com.microsoft", name="qlap", **kw)
    op_model(name, node, [("x", x)], ONNX_T[dt], inits, [x], "step 1")

# QLinearSigmoid (MLAS's logistic approximation against primc's sigmoid: within a step) and QLinearLeakyRelu
for opn, dt, kw, yq, tol in [("QLinearSigmoid", np.uint8, {}, (1 / 256, 0), "step 1"),
                             ("QLinearSigmoid", np.int8, {}, (1 / 256, -128), "step 1"),
                             ("QLinearLeakyRelu", np.uint8, dict(alpha=0.1), (0.03, 100), "exact"),
                             ("QLinearLeakyRelu", np.int8, dict(alpha=0.3), (0.03, -20), "exact")]:
    x = q((3, 7, 11), dt)
    inits = qparams("x", dt, 0.05, 5 if dt == np.int8 else 128) + qparams("y", dt, *yq)
    node = h.make_node(opn, ["x", "x_s", "x_z", "y_s", "y_z"], ["y"], domain="com.microsoft", name=opn.lower(), **kw)
    op_model(f"{opn.lower()}_{dt.__name__}", node, [("x", x)], ONNX_T[dt], inits, [x], tol)

# QLinearSoftmax (ONNX Runtime's table of exp in double, its float32 sums): u8 over the last axis (opset 13), u8 over
# the dims from axis 1 on (opset 12, flattened), i8 over a middle axis (opset 13); within a step (primc's sums
# round once, ONNX Runtime's at every add)
for dt, opset, axis, yq in [(np.uint8, 13, -1, (1 / 256, 0)), (np.uint8, 12, 1, (1 / 256, 0)), (np.int8, 13, 1, (1 / 256, -128))]:
    x = q((2, 12, 10, 16), dt) if opset == 13 else q((3, 4, 5), dt)
    inits = qparams("x", dt, 0.08, 3 if dt == np.int8 else 128) + qparams("y", dt, *yq)
    node = h.make_node("QLinearSoftmax", ["x", "x_s", "x_z", "y_s", "y_z"], ["y"], domain="com.microsoft",
                       name=f"qlsoftmax_{opset}", axis=axis, opset=opset)
    op_model(f"qlinearsoftmax_{dt.__name__}_{opset}", node, [("x", x)], ONNX_T[dt], inits, [x], "step 1")

# QGemm: u8 x s8 with transB, an int32 bias, alpha and per-column b_scale, to u8; and s8 x s8 with transA to float32
a, b = q((17, 40), np.uint8), q((24, 40), np.int8)
inits = qparams("a", np.uint8, 0.02, 120) + [nh.from_array(b, "b"), nh.from_array((rng.random(24) * 0.01 + 0.002).astype(np.float32), "b_s"),
                                              nh.from_array(np.zeros(24, np.int8), "b_z"),
                                              nh.from_array(rng.integers(-3000, 3000, 24, dtype=np.int32), "bias")] + qparams("y", np.uint8, 0.05, 110)
node = h.make_node("QGemm", ["a", "a_s", "a_z", "b", "b_s", "b_z", "bias", "y_s", "y_z"], ["y"], transB=1, alpha=0.75,
                   domain="com.microsoft", name="qgemm")
op_model("qgemm_u8", node, [("a", a)], T.UINT8, inits, [a])
a, b = q((40, 9), np.int8), q((40, 12), np.int8)
inits = qparams("a", np.int8, 0.02, -5) + [nh.from_array(b, "b")] + qparams("b", np.int8, 0.004, 0) + [
    nh.from_array(rng.integers(-3000, 3000, (1, 12), dtype=np.int32), "bias")]
node = h.make_node("QGemm", ["a", "a_s", "a_z", "b", "b_s", "b_z", "bias"], ["y"], transA=1, domain="com.microsoft", name="qgemm_f")
op_model("qgemm_float", node, [("a", a)], T.FLOAT, inits, [a])

# com.microsoft QLinearConv with channels_last (ONNX Runtime's NHWC transformer writes it; W stays [M, C, kh, kw])
x = q((1, 9, 9, 6), np.uint8)
w = q((8, 6, 3, 3), np.int8)
inits = qparams("x", np.uint8, 0.02, 128) + [nh.from_array(w, "w"), c("w_s", np.float32(0.01)), c("w_z", np.int8(0))] + \
    qparams("y", np.uint8, 0.15, 120) + [nh.from_array(rng.integers(-500, 500, 8, dtype=np.int32), "bias")]
node = h.make_node("QLinearConv", ["x", "x_s", "x_z", "w", "w_s", "w_z", "y_s", "y_z", "bias"], ["y"], channels_last=1,
                   pads=[1, 1, 1, 1], strides=[2, 2], kernel_shape=[3, 3], domain="com.microsoft", name="qlconv_nhwc")
op_model("qlinearconv_nhwc", node, [("x", x)], T.UINT8, inits, [x], "step 1")

# com.microsoft QuantizeLinear and DequantizeLinear, per channel (axis 1), float32 in and out
x = (rng.standard_normal((2, 4, 6)) * 3).astype(np.float32)
inits = [nh.from_array(np.array([0.02, 0.05, 0.1, 0.03], np.float32), "s"), nh.from_array(np.array([-3, 0, 7, 2], np.int8), "z")]
nodes = [h.make_node("QuantizeLinear", ["x", "s", "z"], ["xq"], axis=1, domain="com.microsoft", name="msq"),
         h.make_node("DequantizeLinear", ["xq", "s", "z"], ["y"], axis=1, domain="com.microsoft", name="msdq")]
g = h.make_graph(nodes, "msqdq", [h.make_tensor_value_info("x", T.FLOAT, x.shape)], [h.make_tensor_value_info("y", T.FLOAT, None)], inits)
save("ms_qdq", h.make_model(g, opset_imports=[h.make_opsetid("", 17), MS]), [x], "exact")


# the zoo models through quantize_static, QOperator format (q_NAME), or QDQ with per-channel weight scales
# (qdq_NAME: primc's qdq pass runs their convs on the integers); tolerance: one step of the output's DequantizeLinear
def quantized(name, act, weight, qdq=False):
    from onnxruntime.quantization import CalibrationDataReader, QuantFormat, quantize_static
    src = os.path.join(models, name, "model.onnx")
    inp = onnx.load(src).graph.input[0]
    shape = [d.dim_value for d in inp.type.tensor_type.shape.dim]

    class Reader(CalibrationDataReader):
        def __init__(self):
            self.it = iter([{inp.name: rng.standard_normal(shape).astype(np.float32)} for _ in range(4)])

        def get_next(self):
            return next(self.it, None)

    d = os.path.join(out, f"{'qdq' if qdq else 'q'}_{name}")
    os.makedirs(d, exist_ok=True)
    with tempfile.TemporaryDirectory() as t:
        f = os.path.join(t, "model.onnx")
        quantize_static(src, f, Reader(), quant_format=QuantFormat.QDQ if qdq else QuantFormat.QOperator,
                        activation_type=act, weight_type=weight, per_channel=qdq)
        m = onnx.load(f)
    outname = m.graph.output[0].name
    dq = [n for n in m.graph.node if outname in n.output][0]
    assert dq.op_type == "DequantizeLinear", dq.op_type
    step = float(nh.to_array([i for i in m.graph.initializer if i.name == dq.input[1]][0]))
    ops = sorted({(n.domain or "ai.onnx") + ":" + n.op_type for n in m.graph.node})
    print(name, ops)
    x = np.load(os.path.join(models, name, "input.npy")).astype(np.float32)
    save(os.path.basename(d), m, [x], f"step {step!r}")


# a model through quantize_dynamic (dyn_NAME: ConvInteger on DynamicQuantizeLinear's u8 and its run-time zero point,
# com.microsoft DynamicQuantizeLSTM); its output is float: tolerance one step of what DynamicQuantizeLinear would give
# ONNX Runtime's output
def dynamic(name, src=None, x=None, per_channel=True):
    from onnxruntime.quantization import QuantType, quantize_dynamic
    d = os.path.join(out, f"dyn_{name}")
    os.makedirs(d, exist_ok=True)
    with tempfile.TemporaryDirectory() as t:
        f = os.path.join(t, "model.onnx")
        quantize_dynamic(src or os.path.join(models, name, "model.onnx"), f, weight_type=QuantType.QInt8,
                         per_channel=per_channel)
        m = onnx.load(f)
    x = x if x is not None else np.load(os.path.join(models, name, "input.npy")).astype(np.float32)
    ref = session(m).run(None, {m.graph.input[0].name: x})[0]
    print(name, sorted({(n.domain or "ai.onnx") + ":" + n.op_type for n in m.graph.node}))
    save(os.path.basename(d), m, [x], f"step {float((max(ref.max(), 0) - min(ref.min(), 0)) / 255)!r}")


# a bidirectional float LSTM (initial states given), for quantize_dynamic to turn into DynamicQuantizeLSTM
def bidir_lstm(path):
    S, B, I, H = 7, 3, 10, 12
    w = (rng.standard_normal((2, 4 * H, I)) * 0.3).astype(np.float32)
    r = (rng.standard_normal((2, 4 * H, H)) * 0.3).astype(np.float32)
    b = (rng.standard_normal((2, 8 * H)) * 0.1).astype(np.float32)
    h0 = (rng.standard_normal((2, B, H)) * 0.5).astype(np.float32)
    c0 = (rng.standard_normal((2, B, H)) * 0.5).astype(np.float32)
    node = h.make_node("LSTM", ["x", "w", "r", "b", "", "h0", "c0"], ["y", "yh"], direction="bidirectional",
                       hidden_size=H, name="lstm_bidir")
    g = h.make_graph([node], "lstm_bidir", [h.make_tensor_value_info("x", T.FLOAT, [S, B, I])],
                     [h.make_tensor_value_info("y", T.FLOAT, None), h.make_tensor_value_info("yh", T.FLOAT, None)],
                     [nh.from_array(v, n) for v, n in [(w, "w"), (r, "r"), (b, "b"), (h0, "h0"), (c0, "c0")]])
    onnx.save(h.make_model(g, opset_imports=[h.make_opsetid("", 14)]), path)
    return rng.standard_normal((S, B, I)).astype(np.float32)


from onnxruntime.quantization import QuantType  # noqa: E402

quantized("resnet_tiny", QuantType.QUInt8, QuantType.QInt8)
quantized("mlp", QuantType.QInt8, QuantType.QInt8)
quantized("yolo_tiny", QuantType.QUInt8, QuantType.QInt8)
quantized("resnet_tiny", QuantType.QUInt8, QuantType.QInt8, qdq=True)
quantized("yolo_tiny", QuantType.QUInt8, QuantType.QInt8, qdq=True)
dynamic("resnet_tiny")
dynamic("lstm")
with tempfile.TemporaryDirectory() as tmpd:
    xb = bidir_lstm(os.path.join(tmpd, "lstm_bidir.onnx"))
    dynamic("lstm_bidir", os.path.join(tmpd, "lstm_bidir.onnx"), xb, per_channel=False)
