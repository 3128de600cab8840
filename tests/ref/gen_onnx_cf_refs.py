#!/usr/bin/env python3
# tests/ref/gen_onnx_cf_refs.py: writes small ONNX models with control flow (If, Loop, Scan) and sequences /
# optionals inside, with onnxruntime reference outputs, to tests/data/onnx_cf/<case>/ (model.onnx, input_0.pb,
# output_K.pb). The graph input is one float tensor "x"; the graph outputs are tensors. Cases ending in
# _error are models primc must refuse with a message naming the node (no outputs written).
import os
import sys

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto as T, helper as h, numpy_helper

OUT = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "data", "onnx_cf")
rng = np.random.default_rng(11)
X = rng.standard_normal((2, 3)).astype(np.float32)


def const(name, v):
    return h.make_node("Constant", [], [name], value=numpy_helper.from_array(np.asarray(v), name + "_t"))


def write(name, nodes, outs, error=False, x=X):
    g = h.make_graph(nodes, name, [h.make_tensor_value_info("x", T.FLOAT, x.shape)],
                     [h.make_empty_tensor_value_info(o) for o in outs])
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 17)])
    m.ir_version = 8
    d = os.path.join(OUT, name)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "input_0.pb"), "wb") as f:
        f.write(numpy_helper.from_array(x, "x").SerializeToString())
    if not error:
        res = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})
        for i, r in enumerate(res):
            with open(os.path.join(d, f"output_{i}.pb"), "wb") as f:
                f.write(numpy_helper.from_array(np.asarray(r), f"out{i}").SerializeToString())
    onnx.save(m, os.path.join(d, "model.onnx"))
    print("wrote", name)


def body(name, nodes, ins, outs):
    return h.make_graph(nodes, name, ins, outs)


def vi(name, t=T.FLOAT, shape=None):
    return h.make_tensor_value_info(name, t, shape)


def if_where():
    """the condition is computed at run time: both branches, then a select"""
    tb = body("then", [h.make_node("Mul", ["x", "two"], ["t_out"])], [], [vi("t_out", shape=[2, 3])])
    eb = body("else", [h.make_node("Sub", ["x", "one"], ["e_out"])], [], [vi("e_out", shape=[2, 3])])
    write("if_where", [const("two", np.float32(2)), const("one", np.float32(1)),
                       h.make_node("ReduceSum", ["x"], ["s"], keepdims=0), const("zero", np.float32(0)),
                       h.make_node("Greater", ["s", "zero"], ["c"]),
                       h.make_node("If", ["c"], ["y"], name="sel", then_branch=tb, else_branch=eb)], ["y"])


def if_const():
    """a condition known at import: only the taken branch, whose output shape differs from the other's"""
    tb = body("then", [h.make_node("ReduceSum", ["x"], ["t_out"], keepdims=1)], [], [vi("t_out")])
    eb = body("else", [h.make_node("Identity", ["x"], ["e_out"])], [], [vi("e_out")])
    write("if_const", [const("c", np.bool_(True)), h.make_node("If", ["c"], ["y"], then_branch=tb, else_branch=eb)],
          ["y"])


def if_shapes_error():
    tb = body("then", [h.make_node("ReduceSum", ["x"], ["t_out"], keepdims=1)], [], [vi("t_out")])
    eb = body("else", [h.make_node("Identity", ["x"], ["e_out"])], [], [vi("e_out")])
    write("if_shapes_error", [h.make_node("ReduceSum", ["x"], ["s"], keepdims=0), const("zero", np.float32(0)),
                              h.make_node("Greater", ["s", "zero"], ["c"]),
                              h.make_node("If", ["c"], ["y"], name="pick", then_branch=tb, else_branch=eb)],
          ["y"], error=True)


def loop_body():
    """y_out = y_in * 2 + iter; scan output y_out; the condition stays true while iter < 2"""
    return body("lb", [h.make_node("Cast", ["it"], ["itf"], to=T.FLOAT), h.make_node("Mul", ["y_in", "two"], ["y2"]),
                       h.make_node("Add", ["y2", "itf"], ["y_out"]), h.make_node("Identity", ["y_out"], ["scan"]),
                       const("lim", np.int64(2)), h.make_node("Less", ["it", "lim"], ["c_out"])],
                [vi("it", T.INT64, []), vi("c_in", T.BOOL, []), vi("y_in")],
                [vi("c_out", T.BOOL, []), vi("y_out"), vi("scan")])


def loop_unrolled():
    """trip count 5, but the body's condition ends it after 3 iterations"""
    write("loop_unrolled", [const("two", np.float32(2)), const("m", np.int64(5)), const("c", np.bool_(True)),
                            h.make_node("Loop", ["m", "c", "x"], ["y", "ys"], body=loop_body())], ["y", "ys"])


def loop_trip_error():
    """the trip count depends on x's values"""
    write("loop_trip_error", [const("two", np.float32(2)), h.make_node("ReduceSum", ["x"], ["s"], keepdims=0),
                              h.make_node("Cast", ["s"], ["m"], to=T.INT64), const("c", np.bool_(True)),
                              h.make_node("Loop", ["m", "c", "x"], ["y", "ys"], name="spin", body=loop_body())],
          ["y", "ys"], error=True)


def scan_reverse():
    """a running sum over axis 1 of x, walked backwards, stacked on axis 1 of the output"""
    sb = body("sb", [h.make_node("Add", ["acc_in", "col"], ["acc_out"]), h.make_node("Mul", ["acc_out", "col"], ["o"])],
              [vi("acc_in", shape=[2]), vi("col", shape=[2])], [vi("acc_out", shape=[2]), vi("o", shape=[2])])
    write("scan_reverse", [const("init", np.zeros(2, np.float32)),
                           h.make_node("Scan", ["init", "x"], ["acc", "outs"], body=sb, num_scan_inputs=1,
                                       scan_input_axes=[1], scan_input_directions=[1], scan_output_axes=[1])],
          ["acc", "outs"])


def sequences():
    """split x into columns, insert, erase, read back, count and concatenate"""
    write("sequences", [const("sizes", np.array([1, 2], np.int64)),
                        h.make_node("SplitToSequence", ["x"], ["s0"], axis=1),
                        h.make_node("SplitToSequence", ["x", "sizes"], ["parts"], axis=1),
                        const("p0", np.int64(0)), h.make_node("SequenceAt", ["parts", "p0"], ["first"]),
                        h.make_node("SequenceInsert", ["s0", "first", "p0"], ["s1"]),
                        const("pl", np.int64(-1)), h.make_node("SequenceErase", ["s1", "pl"], ["s2"]),
                        h.make_node("SequenceLength", ["s2"], ["n"]),
                        h.make_node("ConcatFromSequence", ["s2"], ["cat"], axis=1),
                        h.make_node("ConcatFromSequence", ["s2"], ["stk"], axis=0, new_axis=1),
                        h.make_node("SequenceEmpty", [], ["e"], dtype=T.FLOAT),
                        h.make_node("SequenceInsert", ["e", "x"], ["e1"]),
                        const("pz", np.int64(0)), h.make_node("SequenceAt", ["e1", "pz"], ["back"])],
          ["n", "cat", "stk", "back"])


def optionals():
    write("optionals", [h.make_node("Optional", ["x"], ["o"]), h.make_node("OptionalHasElement", ["o"], ["has"]),
                        h.make_node("OptionalGetElement", ["o"], ["v"]), h.make_node("Neg", ["v"], ["y"]),
                        h.make_node("Optional", [], ["none"], type=h.make_tensor_type_proto(T.FLOAT, [2, 3])),
                        h.make_node("OptionalHasElement", ["none"], ["has_none"])],
          ["has", "y", "has_none"])


def main():
    for fn in (if_where, if_const, if_shapes_error, loop_unrolled, loop_trip_error, scan_reverse, sequences, optionals):
        fn()


if __name__ == "__main__":
    main()
