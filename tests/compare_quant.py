#!/usr/bin/env python3
# tests/compare_quant.py: a quantized model's output against ONNX Runtime's, by tests/ref/gen_ms_quant.py's
# tol.txt: "exact" (every element equal) or "step S [within P]" (|got - ref| <= S, one quantization step, on >= 99%
# of the elements, or on a share P of them where ONNX Runtime's own unoptimized run of the model meets no more:
# tests/ref/gen_zoo_quant.py). Prints the max error in steps and the share within one.
# Usage: compare_quant.py GOT.npy DIR
import sys

import numpy as np

got, d = np.load(sys.argv[1]), sys.argv[2]
ref = np.load(f"{d}/ref0.npy")
tol = open(f"{d}/tol.txt").read().split()
if got.shape != ref.shape or got.dtype != ref.dtype:
    sys.exit(f"got {got.dtype}{list(got.shape)}, ONNX Runtime {ref.dtype}{list(ref.shape)}")
err = np.abs(got.astype(np.float64) - ref.astype(np.float64))
step = 1.0 if tol[0] == "exact" else float(tol[1])
within = float(np.mean(err <= step * (1 + 1e-4))) if err.size else 1.0
print(f"max error {err.max() / step if err.size else 0:.3g} steps (step {step:.3g}), {100 * within:.2f}% within one, "
      f"{int(np.count_nonzero(err))} of {err.size} differ")
need = float(tol[3]) if len(tol) > 3 and tol[2] == "within" else 0.99
sys.exit(0 if (err.max() == 0 if tol[0] == "exact" else within >= need) else 1)
