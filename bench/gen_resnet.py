#!/usr/bin/env python3
# bench/gen_resnet.py: ResNet-18 or ResNet-50 (torchvision's layout, batch norm folded into conv biases) written
# straight in ONNX with random weights (no torch needed), for timing --autocast bf16 against f32 and peers.
# Writes OUT/model.onnx and OUT/input.npy ([1, 3, 224, 224]).
# Usage: gen_resnet.py OUT [--depth 18|50]
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
    ap.add_argument("--depth", type=int, choices=(18, 50), default=50)
    a = ap.parse_args()
    rng = np.random.default_rng(0)
    nodes, inits, count = [], [], [0]

    def conv(x, cin, cout, k, s, relu=True):
        count[0] += 1
        n = f"conv{count[0]}"
        w = rng.standard_normal((cout, cin, k, k)) * np.sqrt(2.0 / (cin * k * k))
        inits.append(nh.from_array(w.astype(np.float32), n + ".w"))
        inits.append(nh.from_array((0.01 * rng.standard_normal(cout)).astype(np.float32), n + ".b"))
        nodes.append(h.make_node("Conv", [x, n + ".w", n + ".b"], [n], name=n, kernel_shape=[k, k], strides=[s, s],
                                 pads=[k // 2] * 4))
        if not relu:
            return n
        nodes.append(h.make_node("Relu", [n], [n + ".r"], name=n + ".relu"))
        return n + ".r"

    def add_relu(x, y, name):
        nodes.append(h.make_node("Add", [x, y], [name + ".add"], name=name + ".add"))
        nodes.append(h.make_node("Relu", [name + ".add"], [name], name=name))
        return name

    x = conv("input", 3, 64, 7, 2)
    nodes.append(h.make_node("MaxPool", [x], ["pool"], name="pool", kernel_shape=[3, 3], strides=[2, 2], pads=[1] * 4))
    x, cin = "pool", 64
    blocks = [2, 2, 2, 2] if a.depth == 18 else [3, 4, 6, 3]
    for stage, (n, width) in enumerate(zip(blocks, (64, 128, 256, 512))):
        for b in range(n):
            s = 2 if b == 0 and stage > 0 else 1
            name = f"layer{stage + 1}.{b}"
            if a.depth == 18:
                cout = width
                y = conv(conv(x, cin, width, 3, s), width, width, 3, 1, relu=False)
            else:
                cout = 4 * width
                y = conv(conv(conv(x, cin, width, 1, 1), width, width, 3, s), width, cout, 1, 1, relu=False)
            short = conv(x, cin, cout, 1, s, relu=False) if s != 1 or cin != cout else x
            x, cin = add_relu(y, short, name), cout
    nodes.append(h.make_node("GlobalAveragePool", [x], ["gap"], name="gap"))
    nodes.append(h.make_node("Flatten", ["gap"], ["flat"], name="flat"))
    inits.append(nh.from_array((rng.standard_normal((1000, cin)) / np.sqrt(cin)).astype(np.float32), "fc.w"))
    inits.append(nh.from_array(np.zeros(1000, np.float32), "fc.b"))
    nodes.append(h.make_node("Gemm", ["flat", "fc.w", "fc.b"], ["output"], name="fc", transB=1))
    graph = h.make_graph(nodes, f"resnet{a.depth}", [h.make_tensor_value_info("input", T.FLOAT, [1, 3, 224, 224])],
                         [h.make_tensor_value_info("output", T.FLOAT, [1, 1000])], inits)
    os.makedirs(a.out, exist_ok=True)
    onnx.save(h.make_model(graph, opset_imports=[h.make_opsetid("", 17)]), os.path.join(a.out, "model.onnx"))
    np.save(os.path.join(a.out, "input.npy"), rng.standard_normal((1, 3, 224, 224)).astype(np.float32))


if __name__ == "__main__":
    main()
