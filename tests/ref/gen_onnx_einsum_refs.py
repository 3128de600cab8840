#!/usr/bin/env python3
# tests/ref/gen_onnx_einsum_refs.py: one-node Einsum models with numpy.einsum reference outputs, written to
# tests/data/onnx_nn/einsum_<case>/ (model.onnx, input_0.pb, output_0.pb) for tests/unit/test_onnx_nn.c.
# Cases: "..." (broadcast across operands, fewer ellipsis dims in one operand, implicit output), a letter
# repeated in one term (diagonal), "..." standing for no dims, and numpy's broadcasting of a size-1 labelled dim. Operand 0 is the graph
# input, the others are initializers. Fixed seed: rerunning writes the same files.
# Run: python3 tests/ref/gen_onnx_einsum_refs.py
import os

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data", "onnx_nn")
rng = np.random.default_rng(12)


def f32(*shape):
    return rng.standard_normal(shape).astype(np.float32)


def case(name, equation, *operands):
    want = np.einsum(equation, *operands).astype(np.float32)
    x, inits = operands[0], [numpy_helper.from_array(v, f"w{i}") for i, v in enumerate(operands[1:])]
    node = helper.make_node("Einsum", ["x"] + [t.name for t in inits], ["y"], name=f"{name}_node", equation=equation)
    g = helper.make_graph([node], name, [helper.make_tensor_value_info("x", TensorProto.FLOAT, x.shape)],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, want.shape)], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 12)])
    m.ir_version = 8
    d = os.path.join(OUT, f"einsum_{name}")
    os.makedirs(d, exist_ok=True)
    onnx.save(m, os.path.join(d, "model.onnx"))
    with open(os.path.join(d, "input_0.pb"), "wb") as f:
        f.write(numpy_helper.from_array(x, "x").SerializeToString())
    with open(os.path.join(d, "output_0.pb"), "wb") as f:
        f.write(numpy_helper.from_array(np.asarray(want), "y").SerializeToString())
    print("wrote", d, want.shape)


def main():
    case("ellipsis_batch_broadcast", "...ij,...jk->...ik", f32(2, 1, 3, 4), f32(5, 4, 2))
    case("ellipsis_implicit_trace", "...ii", f32(3, 2, 4, 4))
    case("ellipsis_middle_implicit", "i...j,j", f32(3, 2, 5, 4), f32(4))
    case("ellipsis_of_no_dims", "...i,i", f32(4), f32(4))
    case("diagonal_three", "iji,jk->ik", f32(3, 2, 3), f32(2, 4))
    case("label_broadcast", "ij,ij->ij", f32(1, 3), f32(2, 3))


if __name__ == "__main__":
    main()
