#!/usr/bin/env python3
# tests/compare_vmap.py: a model compiled with `--vmap input=3` against ONNX Runtime run on each batch entry:
# the batched input stacks three variants of the model's input.npy (scaled and negated floats; integer
# tokens shifted), and each slice of the batched output must match within rtol 1e-4, atol 1e-5.
# Usage: compare_vmap.py MODEL_DIR EXE TMPDIR
import os
import subprocess
import sys

import numpy as np
import onnxruntime as ort


def main():
    d, exe, tmp = sys.argv[1], sys.argv[2], sys.argv[3]
    x = np.load(os.path.join(d, "input.npy"))
    xs = [x, 0.5 * x, -x] if x.dtype.kind == "f" else [x, np.roll(x, 1), x[..., ::-1].copy()]
    xs = [v.astype(x.dtype) for v in xs]
    np.save(os.path.join(tmp, "xb.npy"), np.stack(xs))
    subprocess.run([exe, os.path.join(tmp, "xb.npy"), "-o", os.path.join(tmp, "out")], check=True, capture_output=True)
    got = np.load(os.path.join(tmp, "out", "out0.npy"))
    sess = ort.InferenceSession(os.path.join(d, "model.onnx"), providers=["CPUExecutionProvider"])
    name = sess.get_inputs()[0].name
    worst = 0.0
    for k, v in enumerate(xs):
        want = sess.run(None, {name: v})[0]
        err = np.abs(got[k] - want) - 1e-4 * np.abs(want)
        worst = max(worst, float(err.max()))
        if got[k].shape != want.shape or err.max() > 1e-5:
            print(f"entry {k}: off by {err.max():.3g} beyond rtol 1e-4")
            return 1
    print(f"3 batch entries match ONNX Runtime, worst {worst:.2g} beyond rtol 1e-4")
    return 0


if __name__ == "__main__":
    sys.exit(main())
