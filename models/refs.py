#!/usr/bin/env python3
# models/refs.py: runs each exported model under ONNX Runtime on its input.npy and saves expected.npy beside it.
# Usage: python3 models/refs.py [DIR ...]   (default: every models/*/, models/large/*/ and models/extended/*/ holding
# model.onnx)
import glob
import os
import sys

import numpy as np
import onnxruntime as ort

HERE = os.path.dirname(os.path.abspath(__file__))


def ref(d):
    sess = ort.InferenceSession(os.path.join(d, "model.onnx"), providers=["CPUExecutionProvider"])
    x = np.load(os.path.join(d, "input.npy"))
    out = sess.run(None, {sess.get_inputs()[0].name: x})[0]
    np.save(os.path.join(d, "expected.npy"), out)
    print(f"{os.path.relpath(d, HERE)}: output {out.dtype}{list(out.shape)}")


dirs = sys.argv[1:] or sorted(os.path.dirname(p) for p in glob.glob(os.path.join(HERE, "*", "model.onnx"))
                              + glob.glob(os.path.join(HERE, "large", "*", "model.onnx"))
                              + glob.glob(os.path.join(HERE, "extended", "*", "model.onnx")))
for d in dirs:
    ref(d)
