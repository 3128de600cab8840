# tests/ref/ort_exact.py: ONNX Runtime as an exact reference for u8 x s8 integer contractions on every CPU.
# On x86 CPUs without VNNI (AVX2-only: Zen 3 and older), ONNX Runtime's u8 x s8 GEMM sums each pair of products
# in int16 with saturation (vpmaddubsw): 255 * 127 * 2 does not fit, so its outputs there are not the ops'
# arithmetic (a dynamically quantized linear layer came out 12 off at 126, QGemm 91 steps off). Its u8 x u8 GEMM
# widens to int16 first and is exact. unsaturated(model) rewrites every s8 weight (with its zero point) of an
# integer contraction whose activations are u8 to u8 by adding 128 to both: the same differences w - zp, so the
# same model, which ONNX Runtime then runs on its exact path. Used for references only; the tests compile the
# model as written.
import numpy as np
import onnx
from onnx import TensorProto as T
from onnx import numpy_helper as nh

# op type -> [(activation, its zero point, weight, weight zero point)] as input positions; activation None: u8 by
# the op's definition (DynamicQuantizeLSTM quantizes its inputs to u8 itself)
SLOTS = {
    "QLinearConv": [(0, 2, 3, 5)],
    "QLinearMatMul": [(0, 2, 3, 5)],
    "QGemm": [(0, 2, 3, 5)],
    "MatMulInteger": [(0, 2, 1, 3)],
    "ConvInteger": [(0, 2, 1, 3)],
    "DynamicQuantizeLSTM": [(None, None, 1, 9), (None, None, 2, 11)],
}
CONTRACTIONS = {"Conv", "MatMul", "Gemm", "ConvTranspose"}


def unsaturated(model):
    m = onnx.ModelProto()
    m.CopyFrom(model)
    g = m.graph
    inits = {i.name: i for i in g.initializer}
    consumers, producer = {}, {}
    for n in g.node:
        for o in n.output:
            producer[o] = n
        for i, name in enumerate(n.input):
            consumers.setdefault(name, []).append((n, i))

    def u8_copy(name):  # a new initializer: the s8 one may have other readers
        if name + "_u8" not in inits:
            t = nh.from_array((nh.to_array(inits[name]).astype(np.int16) + 128).astype(np.uint8), name + "_u8")
            g.initializer.append(t)
            inits[t.name] = t
        return name + "_u8"

    def to_u8(n, w_at, zp_at):
        w = n.input[w_at] if w_at < len(n.input) else ""
        if w not in inits or inits[w].data_type != T.INT8:
            return
        zp = n.input[zp_at] if zp_at < len(n.input) else ""
        if zp and (zp not in inits or inits[zp].data_type != T.INT8):
            return
        n.input[w_at] = u8_copy(w)
        while len(n.input) <= zp_at:
            n.input.append("")
        if zp:
            n.input[zp_at] = u8_copy(zp)
        else:
            n.input[zp_at] = "u8_zero_point_128"
            if n.input[zp_at] not in inits:
                t = nh.from_array(np.array(128, np.uint8), n.input[zp_at])
                g.initializer.append(t)
                inits[t.name] = t

    inputs = {i.name: i.type.tensor_type.elem_type for i in g.input}

    def act_u8(n, a, a_zp):  # whether activation input a of n is u8: its zero point's type, or where it comes from
        if a is None:
            return True
        az = n.input[a_zp] if a_zp < len(n.input) else ""
        if az in inits:
            return inits[az].data_type == T.UINT8
        x = n.input[a]
        p = producer.get(x)
        return inputs.get(x) == T.UINT8 or (p is not None and p.op_type == "DynamicQuantizeLinear")

    for n in g.node:
        for a, a_zp, w_at, zp_at in SLOTS.get(n.op_type, []):
            if act_u8(n, a, a_zp):
                to_u8(n, w_at, zp_at)
    # QDQ: an s8 weight's DequantizeLinear feeding a float contraction (activations u8 in the models tested)
    for n in g.node:
        if n.op_type != "DequantizeLinear" or not all(c.op_type in CONTRACTIONS for c, _ in consumers.get(n.output[0], [])):
            continue
        to_u8(n, 0, 2)
    read = {i for n in g.node for i in n.input}
    keep = [i for i in g.initializer if i.name in read or i.name in {o.name for o in g.output}]
    del g.initializer[:]
    g.initializer.extend(keep)
    return m
