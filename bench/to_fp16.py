#!/usr/bin/env python3
# bench/to_fp16.py: an fp32 ONNX model stored in float16, as a user converting a model for deployment would have
# it: every float initializer, graph input and output, Constant and Cast-to-float made FLOAT16 (Resize's scales and
# roi stay float, as ONNX requires); value_info dropped for shape inference to redo. For bench/precision.md's
# "fp16-stored model" rows. Usage: python3 bench/to_fp16.py IN.onnx OUT.onnx
import sys

import numpy as np
import onnx
from onnx import TensorProto as T
from onnx import numpy_helper as nh


def main(src, dst):
    m = onnx.load(src)
    g = m.graph
    keep = set()  # float inputs that must stay float
    for n in g.node:
        for k, name in enumerate(n.input):
            if n.op_type == "Resize" and k in (1, 2):
                keep.add(name)
    for i, t in enumerate(g.initializer):
        if t.data_type == T.FLOAT and t.name not in keep:
            g.initializer[i].CopyFrom(nh.from_array(nh.to_array(t).astype(np.float16), t.name))
    for v in list(g.input) + list(g.output):
        if v.type.tensor_type.elem_type == T.FLOAT:
            v.type.tensor_type.elem_type = T.FLOAT16
    del g.value_info[:]
    for n in g.node:
        for a in n.attribute:
            if n.op_type == "Cast" and a.name == "to" and a.i == T.FLOAT:
                a.i = T.FLOAT16
            if a.type == onnx.AttributeProto.TENSOR and a.t.data_type == T.FLOAT and n.output[0] not in keep:
                a.t.CopyFrom(nh.from_array(nh.to_array(a.t).astype(np.float16), a.t.name))
    onnx.save(m, dst)


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit("usage: to_fp16.py IN.onnx OUT.onnx")
    main(sys.argv[1], sys.argv[2])
