#!/usr/bin/env python3
"""tests/fuzz/gen_seeds.py: writes the fuzz seeds under tests/fuzz/seeds/ (committed; rerun when a format changes).

onnx/       models whose types and subgraphs nest a few levels (sequence of sequence of tensor, optional of
            sequence, If inside If), so that mutation and the dictionary (tests/fuzz/onnx.dict) reach nesting
onnx_nest/  the same nested thousands of levels deep in a small file: protobuf-c unpacks nested messages
            recursively, so these overflow the stack until the importer bounds nesting (issue 26 item 2)
safetensors/ files matching, and nearly matching, the constants of tests/fuzz/fuzz_safetensors.c's graph
weights/    inputs of tests/fuzz/fuzz_weights.c: each mode byte over the built-in valid file, and a raw header
The protobuf bytes are written by hand (field numbers from onnx.proto), so no onnx package is needed and the
deep seeds are not limited by a protobuf library's own recursion bound.
"""
import json
import os
import struct

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "seeds")


def varint(n):
    out = b""
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out += bytes([b | 0x80])
        else:
            return out + bytes([b])


def field(num, payload):  # length-delimited field
    return varint(num << 3 | 2) + varint(len(payload)) + payload


def vint(num, n):  # varint field
    return varint(num << 3) + varint(n)


def s(x):
    return x.encode()


FLOAT = 1


def tensor_type(dims):  # TypeProto{tensor_type{elem_type, shape{dim{dim_value}}}}
    shape = b"".join(field(1, vint(1, d)) for d in dims)
    return field(1, vint(1, FLOAT) + field(2, shape))


def seq_of(t):  # TypeProto{sequence_type{elem_type: t}}
    return field(4, field(1, t))


def opt_of(t):  # TypeProto{optional_type{elem_type: t}}
    return field(9, field(1, t))


def value_info(name, t):
    return field(1, s(name)) + field(2, t)


def node(op, ins, outs, attrs=b""):
    return b"".join(field(1, s(i)) for i in ins) + b"".join(field(2, s(o)) for o in outs) + field(4, s(op)) + attrs


def graph(nodes, inputs, outputs, name="g", inits=b""):
    return (b"".join(field(1, n) for n in nodes) + field(2, s(name)) + inits +
            b"".join(field(11, i) for i in inputs) + b"".join(field(12, o) for o in outputs))


def model(g, opset=18):
    return vint(1, 8) + field(8, field(1, b"") + vint(2, opset)) + field(7, g)


def attr_graph(name, g):  # AttributeProto{name, g, type GRAPH (5)}
    return field(5, field(1, s(name)) + field(6, g) + vint(20, 5))


def nested_seq_model(depth):
    t = tensor_type([2])
    for _ in range(depth):
        t = seq_of(t)
    return model(graph([node("Identity", ["x"], ["y"])], [value_info("x", t)], [value_info("y", t)]))


def nested_opt_seq_model(depth):
    t = tensor_type([2])
    for i in range(depth):
        t = opt_of(t) if i % 2 else seq_of(t)
    return model(graph([node("Identity", ["x"], ["y"])], [value_info("x", t)], [value_info("y", t)]))


def nested_if_model(depth):
    """If inside the then_branch of If, depth levels; the else_branch is a one-node leaf (so the file grows
    linearly); names are short so thousands of levels fit in a small file"""
    leaf = graph([node("Identity", ["x"], ["y"])], [], [value_info("y", tensor_type([2]))], "l")
    g = leaf
    for d in range(depth):
        n = node("If", ["c"], ["y"], attr_graph("then_branch", g) + attr_graph("else_branch", leaf))
        top = d == depth - 1
        inputs = [value_info("x", tensor_type([2])), value_info("c", field(1, vint(1, 9) + field(2, b"")))] if top else []
        g = graph([n], inputs, [value_info("y", tensor_type([2]))], "top" if top else "b")
    return model(g)


def write(dirname, name, data):
    d = os.path.join(ROOT, dirname)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def safetensors(tensors, meta=None):
    header, blob = {}, b""
    for name, (dt, shape, data) in tensors.items():
        header[name] = {"dtype": dt, "shape": shape, "data_offsets": [len(blob), len(blob) + len(data)]}
        blob += data
    if meta:
        header["__metadata__"] = meta
    h = json.dumps(header).encode()
    return struct.pack("<Q", len(h)) + h + blob


def main():
    for depth in (2, 3, 5):
        write("onnx", "seq_nest_%d.onnx" % depth, nested_seq_model(depth))
        write("onnx", "opt_seq_nest_%d.onnx" % depth, nested_opt_seq_model(depth))
        write("onnx", "if_nest_%d.onnx" % depth, nested_if_model(depth))
    write("onnx_nest", "seq_nest_5000.onnx", nested_seq_model(5000))
    write("onnx_nest", "opt_seq_nest_5000.onnx", nested_opt_seq_model(5000))
    write("onnx_nest", "if_nest_3000.onnx", nested_if_model(3000))

    f32 = lambda n: struct.pack("<%df" % n, *[i * 0.5 for i in range(n)])
    good = {"a": ("F32", [2, 3], f32(6)), "b": ("I64", [4], struct.pack("<4q", 1, -2, 3, 4)),
            "c": ("F16", [1, 1, 2], b"\x00\x3c\x00\xc0"), "d": ("U8", [0], b""), "e": ("F64", [], struct.pack("<d", 2.5))}
    write("safetensors", "all.safetensors", safetensors(good, {"format": "pt"}))
    write("safetensors", "one.safetensors", safetensors({"a": good["a"]}))
    bad_shape = dict(good, a=("F32", [3, 2], f32(6)))
    write("safetensors", "shape.safetensors", safetensors(bad_shape))
    bad_type = dict(good, b=("I32", [4], struct.pack("<4i", 1, 2, 3, 4)))
    write("safetensors", "dtype.safetensors", safetensors(bad_type))
    write("safetensors", "escapes.safetensors",
          safetensors({"a\\u0041\"": good["a"], "\u00e9": good["e"]}, {"k": "v\\n\\u00ff"}))

    for mode in (1, 2, 3, 4 | 1, 8 | 1, 8 | 4 | 2):
        write("weights", "edits_%02x" % mode, bytes([mode]) + bytes([0x48, 0x00, 0x07, 0x4c, 0x00, 0x00, 0x08, 0x01, 0x40]))
    hdr = b"PRIMCWTS" + struct.pack("<IIQQ", 1, 64, 64, 0) + bytes(24) + struct.pack("<Q", 0)
    write("weights", "raw_header", b"\x00" + hdr + bytes(64))
    write("weights", "raw_header_mapped", b"\x04" + hdr + bytes(64))


if __name__ == "__main__":
    main()
