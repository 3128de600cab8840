#!/usr/bin/env python3
# tests/ref/gen_onnx_node_tests.py: writes the ONNX backend node tests (model.onnx + test_data_set_*/*.pb) to a folder.
# The PyPI onnx wheel installed here ships the node test generators but not their data; this
# script runs the generators, which compute expected outputs with numpy (an independent reference).
import os
import re
import sys

import numpy as np
import onnx
from onnx import numpy_helper
import onnx.backend.test.case.node as node_test

# Two generators' data follow the installed libraries rather than the spec, so the same onnx wrote other data on
# another machine; their outputs are recomputed here, in numpy, as the libraries of the expected list computed them.
# - Cast (and CastLike) of floats to 4- and 2-bit integers: out-of-range values are undefined (ONNX Cast spec); the
#   generator's ml_dtypes wrapped them (0.5, 0.6) and gives 0 from 0.7 on: wrapped here, two's complement.
# - The inverse DFT's reference is numpy's ifft of complex64 data, computed in single precision from numpy 2.0 on
#   (1.9e-7 where the sum is 0, past the runner's atol of 1e-7): computed here in double precision, then rounded.
LOW_BIT_CAST = re.compile(r"test_cast(like)?_FLOAT(16)?_to_(U?)INT([24])(_expanded)?$")
DFT_INVERSE = re.compile(r"test_dft_inverse(_opset19)?$")


def array(v):
    return numpy_helper.to_array(v) if isinstance(v, onnx.TensorProto) else np.asarray(v)


def low_bit_cast(inputs, outputs, unsigned, bits):
    x = array(inputs[0]).astype(np.float64)
    w = np.trunc(x).astype(np.int64) % (1 << bits)
    if not unsigned:
        w = np.where(w >= 1 << (bits - 1), w - (1 << bits), w)
    out = outputs[0]
    y = numpy_helper.from_array(w.astype(array(out).dtype), out.name if isinstance(out, onnx.TensorProto) else "")
    return [y] + list(outputs[1:])


def dft_inverse(inputs, outputs, case):
    node = case.model.graph.node[0]
    axis = next((a.i for a in node.attribute if a.name == "axis"), 1)
    x = array(inputs[0]).astype(np.float64)
    y = np.fft.ifft(x[..., 0] + 1j * x[..., 1], axis=axis)
    return [np.stack((y.real, y.imag), axis=-1).astype(np.float32)] + list(outputs[1:])


def reference(case, inputs, outputs):
    m = LOW_BIT_CAST.match(case.name)
    if m:
        return low_bit_cast(inputs, outputs, m.group(3) == "U", int(m.group(4)))
    if DFT_INVERSE.match(case.name):
        return dft_inverse(inputs, outputs, case)
    return outputs


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
        outputs = reference(case, inputs, outputs)
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
