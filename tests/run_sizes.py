#!/usr/bin/env python3
# tests/run_sizes.py: runs a model compiled with run-time dims at several input shapes (random normal inputs) and
# compares each output with ONNX Runtime's on the same input, normwise: max |primc - ort| <= tol * max |ort|
# (large models' outputs, see tests/compare_npy.py --normwise). One PASS/FAIL line per shape; exit 1 on a FAIL.
# Usage: run_sizes.py MODEL.onnx EXE TMPDIR SHAPES [SHAPES ...] [--tol 1e-4]
# SHAPES: one shape per model input, comma-separated, each as 8x512x768. Float inputs are normal; integer inputs
# are token ids in 0..99, except one whose name holds "mask": ones, with the last third of each row 0.
import subprocess
import sys

import numpy as np
import onnxruntime as ort


def main():
    args = sys.argv[1:]
    tol = 1e-4
    if "--tol" in args:
        i = args.index("--tol")
        tol = float(args[i + 1])
        del args[i:i + 2]
    model, exe, tmp, shapes = args[0], args[1], args[2], args[3:]
    sess = ort.InferenceSession(model, providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(0)
    bad = 0
    for spec in shapes:
        feeds, paths = {}, []
        for k, (inp, s) in enumerate(zip(sess.get_inputs(), spec.split(","))):
            shape = tuple(int(x) for x in s.split("x"))
            if "float" in inp.type:
                x = rng.standard_normal(shape).astype(np.float32)
            elif "mask" in inp.name:
                x = np.ones(shape, np.int64)
                x[..., shape[-1] - shape[-1] // 3:] = 0
            else:
                x = rng.integers(0, 100, shape).astype(np.int64)
            feeds[inp.name] = x
            paths.append(f"{tmp}/in{k}.npy")
            np.save(paths[-1], x)
        r = subprocess.run([exe, *paths, "-o", f"{tmp}/out"], capture_output=True, text=True)
        if r.returncode:
            print(f"FAIL {spec}: exit {r.returncode}: {r.stderr.strip()[:300]}")
            bad += 1
            continue
        got, want = np.load(f"{tmp}/out/out0.npy"), sess.run(None, feeds)[0]
        err = float(np.abs(got - want).max()) if got.shape == want.shape else float("inf")
        scale = float(np.abs(want).max())
        ok = err <= tol * max(scale, 1e-30)
        print(f"{'PASS' if ok else 'FAIL'} {spec}: output {list(got.shape)}, max error {err:.3g} of max |output| "
              f"{scale:.3g}")
        bad += not ok
    sys.exit(1 if bad else 0)


main()
