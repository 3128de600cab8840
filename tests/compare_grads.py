#!/usr/bin/env python3
# tests/compare_grads.py: a `--grad` run's gradients against PyTorch's (models/NAME/grad.npz, written by
# tests/ref/gen_grad_refs.py). OUTDIR holds out0.npy ... as the executable or `primc run -o` writes them:
# the model's N_OUT outputs first, then one gradient per entry g0, g1, ... of the references, in order.
# Each gradient must be within rtol 1e-4 of the reference elementwise, plus 1e-4 of its scale: the
# reference's largest |value|, but at least 1% of the largest |gradient| of the model (a gradient sums
# many products, and an f32 sum cancels where f64 does not: the gradient of attention's key bias is
# exactly zero, which f64 gets to 1e-16 and f32 to 1e-8).
# With PREFIX jt, the outputs after the model's are `--jvp`'s tangents against jt0, jt1, ... instead.
# Usage: compare_grads.py OUTDIR REF.npz N_OUT [PREFIX]
import os
import sys

import numpy as np


def main():
    outdir, ref_path, n_out = sys.argv[1], sys.argv[2], int(sys.argv[3])
    prefix = sys.argv[4] if len(sys.argv) > 4 else "g"
    ref = np.load(ref_path)
    keys = sorted((k for k in ref.files if k.startswith(prefix) and k[len(prefix):].isdigit()),
                  key=lambda k: int(k[len(prefix):]))
    worst, bad = 0.0, []
    floor = 1e-2 * max((float(np.abs(ref[k]).max()) for k in keys if ref[k].size), default=0.0)
    for i, k in enumerate(keys):
        path = os.path.join(outdir, f"out{n_out + i}.npy")
        if not os.path.exists(path):
            print(f"missing {path}: {len(keys)} gradients expected")
            return 1
        got, want = np.load(path).astype(np.float64), ref[k].astype(np.float64)
        if got.shape != want.shape:
            bad.append(f"{k}: shape {got.shape}, expected {want.shape}")
            continue
        scale = max(float(np.abs(want).max()) if want.size else 0.0, floor)
        err = np.abs(got - want) - 1e-4 * np.abs(want)
        excess = float(err.max() / max(scale, 1e-30)) if want.size else 0.0
        worst = max(worst, excess)
        if want.size and err.max() > 1e-4 * scale:
            j = int(np.argmax(err))
            bad.append(f"{k}: element {j} is {got.flat[j]:.7g}, torch {want.flat[j]:.7g} (scale {scale:.3g})")
    extra = os.path.join(outdir, f"out{n_out + len(keys)}.npy")
    if os.path.exists(extra):
        bad.append(f"more outputs than the {len(keys)} gradients expected")
    for b in bad:
        print(b)
    what = "tangents" if prefix == "jt" else "gradients"
    print(f"{len(keys)} {what}, worst error {worst:.2g} of their scale beyond rtol 1e-4")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
