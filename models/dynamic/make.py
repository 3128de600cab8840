#!/usr/bin/env python3
# models/dynamic/make.py: the models with run-time dims (--dim NAME=LO..HI) that tests/suites/dynamic.sh compiles
# once and runs at several sizes, with ONNX Runtime's outputs at each size as the reference.
#   batch_cnn/    models/resnet_tiny with its batch a dim_param N (dims.txt: N=1..8)
#   seq_encoder/  bench/gen_encoder.py --dynamic --embed 100, 2 layers of d 64 with BERT's front (input_ids and
#                 attention_mask [batch, seq], position ids from Shape -> Gather -> Range): batch=1..4 seq=1..32
#   image_cnn/    a conv net over any image size: Conv-ReLU, then GlobalAveragePool (its 1/(H W)) beside a
#                 ReduceMean over H (its H) and a ReduceMax, into a MatMul: H=4..32 W=4..32
#   strided_cnn/  convs of stride 2 and a 2x2 max pool (output sizes floor((H + 2p - k) / s) + 1), then
#                 GlobalAveragePool and a MatMul, over image sizes in multiples of 16: H=16..96%16 W=16..96%16
# Each DIR holds model.onnx, dims.txt (the --dim arguments) and per case TAG: in_TAG_K.npy for input K and
# expected_TAG.npy.
# Usage: python3 models/dynamic/make.py [NAME ...]   (all of them by default)
import os
import subprocess
import sys

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


def cases(d, shapes, seed):
    sess = ort.InferenceSession(os.path.join(d, "model.onnx"), providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(seed)
    for shape in shapes:
        tag = "x".join(str(s) for s in shape)
        feeds = {}
        for k, inp in enumerate(sess.get_inputs()):
            if "float" in inp.type:
                x = rng.standard_normal(shape).astype(np.float32)
            elif "mask" in inp.name:  # the last third of each row is padding
                x = np.ones(shape, np.int64)
                x[..., shape[-1] - shape[-1] // 3:] = 0
            else:
                x = rng.integers(0, 100, shape).astype(np.int64)
            feeds[inp.name] = x
            np.save(os.path.join(d, f"in_{tag}_{k}.npy"), x)
        np.save(os.path.join(d, f"expected_{tag}.npy"), sess.run(None, feeds)[0])
    print(f"{os.path.relpath(d, ROOT)}: {len(shapes)} cases")


def batch_cnn():
    d = os.path.join(HERE, "batch_cnn")
    os.makedirs(d, exist_ok=True)
    m = onnx.load(os.path.join(ROOT, "models", "resnet_tiny", "model.onnx"))
    for v in list(m.graph.input) + list(m.graph.output):
        dim = v.type.tensor_type.shape.dim[0]
        dim.ClearField("dim_value")
        dim.dim_param = "N"
    onnx.save(m, os.path.join(d, "model.onnx"))
    with open(os.path.join(d, "dims.txt"), "w") as f:
        f.write("--dim N=1..8\n")
    cases(d, [(1, 3, 64, 64), (3, 3, 64, 64), (8, 3, 64, 64)], 1)


def seq_encoder():
    d = os.path.join(HERE, "seq_encoder")
    subprocess.run([sys.executable, os.path.join(ROOT, "bench", "gen_encoder.py"), d, "--layers", "2", "--d", "64",
                    "--heads", "4", "--ffn", "128", "--seq", "16", "--dynamic", "--embed", "100"], check=True)
    os.remove(os.path.join(d, "input.npy"))
    with open(os.path.join(d, "dims.txt"), "w") as f:
        f.write("--dim batch=1..4 --dim seq=1..32\n")
    cases(d, [(1, 1), (1, 7), (2, 13), (3, 32), (4, 32)], 2)


def image_cnn():
    d = os.path.join(HERE, "image_cnn")
    os.makedirs(d, exist_ok=True)
    r = np.random.default_rng(3)
    w = [numpy_helper.from_array(r.standard_normal(s).astype(np.float32), n)
         for n, s in (("w", (8, 3, 3, 3)), ("b", (8,)), ("f", (8, 4)))]
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, "H", "W"])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1]), helper.make_node("Relu", ["c"], ["r"]),
             helper.make_node("GlobalAveragePool", ["r"], ["g"]), helper.make_node("Flatten", ["g"], ["fl"]),
             helper.make_node("ReduceMean", ["r"], ["mh"], axes=[2], keepdims=0),
             helper.make_node("ReduceMax", ["mh"], ["mx"], axes=[2], keepdims=0),
             helper.make_node("Add", ["fl", "mx"], ["s"]), helper.make_node("MatMul", ["s", "f"], ["y"])]
    g = helper.make_graph(nodes, "image_cnn", [x], [y], w)
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), os.path.join(d, "model.onnx"))
    with open(os.path.join(d, "dims.txt"), "w") as f:
        f.write("--dim H=4..32 --dim W=4..32\n")
    cases(d, [(1, 3, 4, 4), (1, 3, 7, 19), (1, 3, 13, 5), (1, 3, 32, 32)], 3)


def strided_cnn():
    d = os.path.join(HERE, "strided_cnn")
    os.makedirs(d, exist_ok=True)
    r = np.random.default_rng(4)
    w = [numpy_helper.from_array((r.standard_normal(s) * 0.3).astype(np.float32), n)
         for n, s in (("w1", (8, 3, 3, 3)), ("b1", (8,)), ("w2", (16, 8, 3, 3)), ("b2", (16,)), ("f", (16, 4)))]
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, "H", "W"])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])
    nodes = [helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1], strides=[2, 2]),
             helper.make_node("Relu", ["c1"], ["r1"]),
             helper.make_node("MaxPool", ["r1"], ["p1"], kernel_shape=[2, 2], strides=[2, 2]),
             helper.make_node("Conv", ["p1", "w2", "b2"], ["c2"], pads=[1, 1, 1, 1], strides=[2, 2]),
             helper.make_node("Relu", ["c2"], ["r2"]), helper.make_node("GlobalAveragePool", ["r2"], ["g"]),
             helper.make_node("Flatten", ["g"], ["fl"]), helper.make_node("MatMul", ["fl", "f"], ["y"])]
    g = helper.make_graph(nodes, "strided_cnn", [x], [y], w)
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), os.path.join(d, "model.onnx"))
    with open(os.path.join(d, "dims.txt"), "w") as f:
        f.write("--dim H=16..96%16 --dim W=16..96%16\n")
    cases(d, [(1, 3, 16, 16), (1, 3, 32, 80), (1, 3, 96, 48), (1, 3, 96, 96)], 5)


MODELS = {"batch_cnn": batch_cnn, "seq_encoder": seq_encoder, "image_cnn": image_cnn, "strided_cnn": strided_cnn}
for name in sys.argv[1:] or MODELS:
    MODELS[name]()
