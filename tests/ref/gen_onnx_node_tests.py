#!/usr/bin/env python3
# tests/ref/gen_onnx_node_tests.py: writes the ONNX backend node tests (model.onnx + test_data_set_*/*.pb) to a folder.
# The PyPI onnx wheel installed here ships the node test generators but not their data; this
# script runs the generators, which compute expected outputs with numpy (an independent reference).
import os
import sys

import onnx
from onnx import numpy_helper
import onnx.backend.test.case.node as node_test


def to_proto(v, decl):
    """a data set value as ONNX's test data stores it: TensorProto, SequenceProto or OptionalProto"""
    t = decl.type
    if t.HasField("tensor_type"):
        return v if isinstance(v, onnx.TensorProto) else numpy_helper.from_array(v, decl.name)
    if t.HasField("sequence_type"):
        return numpy_helper.from_list(v, decl.name)
    if t.HasField("optional_type"):
        return numpy_helper.from_optional(v, decl.name)
    return None  # maps, sparse tensors: not written


def write_case(out_dir, case):
    d = os.path.join(out_dir, case.name)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "model.onnx"), "wb") as f:
        f.write(case.model.SerializeToString())
    for i, (inputs, outputs) in enumerate(case.data_sets):
        ds = os.path.join(d, f"test_data_set_{i}")
        os.makedirs(ds, exist_ok=True)
        for kind, vals, decls in (("input", inputs, case.model.graph.input),
                                  ("output", outputs, case.model.graph.output)):
            for j, v in enumerate(vals):
                tp = to_proto(v, decls[j])
                if tp is None:
                    return False
                with open(os.path.join(ds, f"{kind}_{j}.pb"), "wb") as f:
                    f.write(tp.SerializeToString())
    return True


def main():
    out_dir = sys.argv[1] if len(sys.argv) > 1 else "build/onnx-node-tests"
    os.makedirs(out_dir, exist_ok=True)
    n = 0
    for case in node_test.collect_testcases():
        if case.kind != "node" or not case.model or not case.data_sets:
            continue
        try:
            if write_case(out_dir, case):
                n += 1
        except Exception as e:  # a generator the installed numpy cannot run: leave it out
            print(f"skip {case.name}: {e}", file=sys.stderr)
    print(f"wrote {n} node tests to {out_dir}")


if __name__ == "__main__":
    main()
