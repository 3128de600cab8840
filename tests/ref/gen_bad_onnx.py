#!/usr/bin/env python3
# tests/ref/gen_bad_onnx.py: writes the small malformed ONNX models of tests/data/onnx_bad/ and the good
# ones of tests/data/onnx_good/ with onnxruntime reference outputs; tests/unit/test_onnx.c reads them.
import os
import random

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data")
BAD = os.path.join(ROOT, "onnx_bad")
GOOD = os.path.join(ROOT, "onnx_good")


def model(nodes, inputs, outputs, inits=(), opset=17, extra_opsets=()):
    g = helper.make_graph(nodes, "g", inputs, outputs, initializer=list(inits))
    ops = [helper.make_opsetid("", opset)] + [helper.make_opsetid(d, v) for d, v in extra_opsets]
    m = helper.make_model(g, opset_imports=ops, producer_name="gen_bad_onnx")
    m.ir_version = 8
    return m


def vi(name, shape, t=TensorProto.FLOAT):
    return helper.make_tensor_value_info(name, t, shape)


def bare_tensor(name, dims):
    t = TensorProto()
    t.name, t.data_type = name, TensorProto.FLOAT
    t.dims.extend(dims)
    return t


def save(m, name, d=BAD):
    with open(os.path.join(d, name), "wb") as f:
        f.write(m.SerializeToString())


def relu_model():
    return model([helper.make_node("Relu", ["x"], ["y"], name="r")], [vi("x", [2, 3])], [vi("y", [2, 3])])


def external_model(location):
    t = helper.make_tensor("w", TensorProto.FLOAT, [4], [0.0] * 4)
    t.ClearField("float_data")
    t.data_location = TensorProto.EXTERNAL
    e = t.external_data.add()
    e.key, e.value = "location", location
    return model([helper.make_node("Add", ["x", "w"], ["y"], name="add_w")], [vi("x", [4])], [vi("y", [4])], [t])


# ---- deep nesting, encoded by hand: the protobuf libraries refuse to build or write messages this deep
def varint(n):
    out = bytearray()
    while True:
        b, n = n & 0x7F, n >> 7
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out)


def ld(field, payload):
    """a length-delimited field: tag, length, payload"""
    return varint(field << 3 | 2) + varint(len(payload)) + payload


def vint(field, n):
    return varint(field << 3) + varint(n)


def wire_model(graph):
    """ModelProto: ir_version 8, opset 17, the given GraphProto bytes"""
    return vint(1, 8) + ld(8, vint(2, 17)) + ld(7, graph)


def value_info(name, type_bytes):
    return ld(1, name.encode()) + ld(2, type_bytes)


def float_tensor_type():
    """TypeProto{tensor_type{elem_type FLOAT, shape{dim{dim_value 1}}}}"""
    return ld(1, vint(1, 1) + ld(2, ld(1, vint(1, 1))))


def nested_sequence_model(levels):
    """a graph input typed sequence(sequence(...(float tensor))) `levels` deep: two messages per level"""
    t = float_tensor_type()
    for _ in range(levels):
        t = ld(4, ld(1, t))  # TypeProto.sequence_type{elem_type: t}
    node = ld(1, b"x") + ld(2, b"y") + ld(3, b"id") + ld(4, b"Identity")
    graph = ld(1, node) + ld(2, b"g") + ld(11, value_info("x", t)) + ld(12, value_info("y", t))
    return wire_model(graph)


def nested_if_model(levels, both=False):
    """If nodes whose then_branch (and else_branch when both, else a leaf) holds the next If, `levels` deep:
    three messages per level; the innermost body negates x"""
    leaf = ld(1, ld(1, b"x") + ld(2, b"y0") + ld(4, b"Neg")) + ld(2, b"b0") + ld(12, value_info("y0", float_tensor_type()))
    body = leaf
    for k in range(1, levels + 1):
        y = b"y%d" % k
        node = ld(1, b"c") + ld(2, y) + ld(3, b"if%d" % k) + ld(4, b"If")
        for branch, g in (("then_branch", body), ("else_branch", body if both else leaf)):
            node += ld(5, ld(1, branch.encode()) + vint(20, 5) + ld(6, g))  # AttributeProto{name, type GRAPH, g}
        body = ld(1, node) + ld(2, b"b%d" % k) + ld(12, value_info(y.decode(), float_tensor_type()))
    scalar_bool = ld(1, vint(1, 9) + ld(2, b""))
    graph = body + ld(11, value_info("c", scalar_bool)) + ld(11, value_info("x", float_tensor_type()))
    return wire_model(graph)


def bare_if_model(levels):
    """If nodes holding only a then_branch holding the next If, `levels` deep, nothing else: small for its depth"""
    body = b""
    for _ in range(levels):
        body = ld(1, ld(4, b"If") + ld(5, vint(20, 5) + ld(6, body)))  # GraphProto{node{op_type, attribute{type, g}}}
    return wire_model(body)


def write_bytes(data, name, d=BAD):
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def bad_models():
    os.makedirs(BAD, exist_ok=True)
    good = relu_model().SerializeToString()
    with open(os.path.join(BAD, "truncated.onnx"), "wb") as f:
        f.write(good[: len(good) // 2])
    rng = random.Random(7)
    with open(os.path.join(BAD, "garbage.onnx"), "wb") as f:
        f.write(bytes(rng.randrange(256) for _ in range(512)))
    save(model([helper.make_node("FooBar", ["x"], ["y"], name="mystery", domain="com.example")],
               [vi("x", [2])], [vi("y", [2])], extra_opsets=[("com.example", 1)]), "unknown_domain.onnx")
    save(model([helper.make_node("NotAnOp", ["x"], ["y"], name="nope")], [vi("x", [2])], [vi("y", [2])]),
         "unknown_op.onnx")
    # an attribute its opset made an input (ReduceMean's axes from opset 18): read as the input, absent, it would
    # silently reduce every axis
    save(model([helper.make_node("ReduceMean", ["x"], ["y"], name="mean", axes=[1], keepdims=0)],
               [vi("x", [2, 3])], [vi("y", [2])], opset=18), "moved_axes_attr.onnx")
    # a misspelt attribute (stride for strides): ignored, the conv would run at stride 1
    w = numpy_helper.from_array(np.ones((4, 3, 3, 3), np.float32), "w")
    save(model([helper.make_node("Conv", ["x", "w"], ["y"], name="conv", kernel_shape=[3, 3], stride=[2, 2])],
               [vi("x", [1, 3, 8, 8])], [vi("y", [1, 4, 3, 3])], [w]), "unknown_attr.onnx")
    # a graph output declared with another dtype than its node computes (a hand edit): refused, named
    save(model([helper.make_node("Relu", ["x"], ["y"], name="relu")], [vi("x", [2, 3])], [vi("y", [2, 3], TensorProto.INT64)]),
         "declared_output_dtype.onnx")
    # primc check: three different problems over four nodes, one node skipped for reading a failed output
    save(model([helper.make_node("Relu", ["x"], ["y0"], name="fine"),
                helper.make_node("NotAnOp", ["x"], ["a"], name="n1"),
                helper.make_node("NotAnOp", ["x"], ["b"], name="n2"),
                helper.make_node("Frobnicate", ["x"], ["c"], name="f"),
                helper.make_node("FooBar", ["x"], ["d"], name="m", domain="com.example"),
                helper.make_node("Relu", ["a"], ["e"], name="after")],
               [vi("x", [2])], [vi(n, [2]) for n in ("y0", "b", "c", "d", "e")], extra_opsets=[("com.example", 1)]),
         "three_unsupported.onnx")
    save(model([helper.make_node("Relu", ["x"], ["y"])], [vi("x", [2])], [vi("y", [2])], opset=99), "bad_opset.onnx")
    save(model([helper.make_node("Add", ["a", "b"], ["y"], name="plus")], [vi("a", [2, 3]), vi("b", [4, 5])],
               [vi("y", [2, 3])]), "shape_mismatch.onnx")
    save(external_model("../outside.bin"), "external_dotdot.onnx")
    save(external_model("/etc/hostname"), "external_abs.onnx")
    save(external_model("weights.bin"), "external_symlink.onnx")  # the unit test links weights.bin outside
    big = bare_tensor("w", [1 << 20, 1 << 20])
    save(model([helper.make_node("Add", ["x", "w"], ["y"])], [vi("x", [1])], [vi("y", [1])], [big]), "absurd_dims.onnx")
    neg = bare_tensor("w", [-3, 2])
    save(model([helper.make_node("Add", ["x", "w"], ["y"])], [vi("x", [1])], [vi("y", [1])], [neg]), "negative_dim.onnx")
    short = bare_tensor("w", [4, 4])
    short.raw_data = b"\0" * 10
    save(model([helper.make_node("Add", ["x", "w"], ["y"])], [vi("x", [4, 4])], [vi("y", [4, 4])], [short]),
         "short_raw.onnx")
    save(model([helper.make_node("If", ["c"], ["y"], name="branch")], [vi("c", [], TensorProto.BOOL)],
               [vi("y", [1])]), "control_flow.onnx")
    save(model([helper.make_node("Relu", ["missing"], ["y"], name="r")], [vi("x", [2])], [vi("y", [2])]),
         "undefined_input.onnx")
    # shapes the fuzzer found: scalar indices where ScatterND needs rank >= 1
    save(model([helper.make_node("ScatterND", ["x", "i", "u"], ["y"], name="snd")],
               [vi("x", [4]), vi("i", [], TensorProto.INT64), vi("u", [])], [vi("y", [4])]),
         "fuzz_scatternd_scalar_indices.onnx")
    # protobuf-c unpacks nested messages recursively: these overflowed the stack of every primc command
    write_bytes(nested_sequence_model(5000), "deep_sequence_type.onnx")
    write_bytes(bare_if_model(4000), "deep_if.onnx")
    # 40 If levels are within the wire format's nesting limit but beyond the importer's own
    write_bytes(nested_if_model(40), "nested_if_40.onnx")


def nested_if_good():
    """nesting a real model may need (6 If levels, both branches) stays accepted: ONNX Runtime checks it is valid"""
    import onnxruntime as ort
    data = nested_if_model(6, both=True)
    sess = ort.InferenceSession(data, providers=["CPUExecutionProvider"])
    (y,) = sess.run(None, {"c": np.array(True), "x": np.array([2.0], np.float32)})
    assert y.tolist() == [-2.0], y
    write_bytes(data, "nested_if_6.onnx", GOOD)


def save_pb(arr, name, path):
    with open(path, "wb") as f:
        f.write(numpy_helper.from_array(arr, name).SerializeToString())


def good_models():
    import onnxruntime as ort
    os.makedirs(GOOD, exist_ok=True)
    rng = np.random.default_rng(3)
    w = rng.standard_normal((4, 3)).astype(np.float32)
    b = rng.standard_normal((3,)).astype(np.float32)
    mlp = model([helper.make_node("MatMul", ["x", "w"], ["h"], name="mm"),
                 helper.make_node("Add", ["h", "b"], ["z"], name="bias"),
                 helper.make_node("Relu", ["z"], ["y"], name="act")],
                [vi("x", [2, 4])], [vi("y", [2, 3])],
                [numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")])
    # Shape -> Gather -> Concat -> Reshape: a shape computed inside the graph
    idx = numpy_helper.from_array(np.array([0], np.int64), "i0")
    minus1 = numpy_helper.from_array(np.array([-1], np.int64), "m1")
    shp = model([helper.make_node("Shape", ["x"], ["s"], name="shape"),
                 helper.make_node("Gather", ["s", "i0"], ["n"], name="batch", axis=0),
                 helper.make_node("Concat", ["n", "m1"], ["ns"], name="cat", axis=0),
                 helper.make_node("Reshape", ["x", "ns"], ["y"], name="flat")],
                [vi("x", [2, 3, 4])], [vi("y", [2, 12])], [idx, minus1])
    for name, m, x in (("mlp", mlp, rng.standard_normal((2, 4)).astype(np.float32)),
                       ("shape_chain", shp, rng.standard_normal((2, 3, 4)).astype(np.float32))):
        save(m, name + ".onnx", GOOD)
        sess = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
        (y,) = sess.run(None, {"x": x})
        save_pb(x, "x", os.path.join(GOOD, name + ".input_0.pb"))
        save_pb(y, "y", os.path.join(GOOD, name + ".output_0.pb"))


if __name__ == "__main__":
    bad_models()
    good_models()
    nested_if_good()
    print("wrote", BAD, "and", GOOD)
