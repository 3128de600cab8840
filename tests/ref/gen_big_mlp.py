#!/usr/bin/env python3
# tests/ref/gen_big_mlp.py: writes an MLP with large weights (Gemm layers as PyTorch exports nn.Linear, transB=1,
# weights in raw_data) to measure compile memory: gen_big_mlp.py OUT.onnx [WIDTH] [LAYERS] [--external]
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    out, width, layers = args[0], int(args[1]) if len(args) > 1 else 4096, int(args[2]) if len(args) > 2 else 3
    rng = np.random.default_rng(5)
    nodes, inits, x = [], [], "x"
    for i in range(layers):
        w = (rng.standard_normal((width, width), dtype=np.float32) / np.sqrt(width)).astype(np.float32)
        b = rng.standard_normal(width, dtype=np.float32) * np.float32(0.1)
        inits += [numpy_helper.from_array(w, f"w{i}"), numpy_helper.from_array(b, f"b{i}")]
        nodes.append(helper.make_node("Gemm", [x, f"w{i}", f"b{i}"], [f"h{i}"], name=f"fc{i}", transB=1))
        x = f"h{i}"
        if i + 1 < layers:
            nodes.append(helper.make_node("Relu", [x], [f"r{i}"], name=f"relu{i}"))
            x = f"r{i}"
    g = helper.make_graph(nodes, "big_mlp", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, width])],
                          [helper.make_tensor_value_info(x, TensorProto.FLOAT, [1, width])], initializer=inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], producer_name="gen_big_mlp")
    m.ir_version = 8
    if "--external" in sys.argv:
        onnx.save_model(m, out, save_as_external_data=True, location=out.rsplit("/", 1)[-1] + ".data",
                        size_threshold=1024)
    else:
        onnx.save_model(m, out)


if __name__ == "__main__":
    main()
