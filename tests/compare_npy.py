#!/usr/bin/env python3
# tests/compare_npy.py: compares an output .npy against a reference .npy; exit 0 when within tolerance.
# Usage: compare_npy.py GOT EXPECTED [--rtol R] [--atol A]
import argparse
import sys

import numpy as np

ap = argparse.ArgumentParser()
ap.add_argument("got")
ap.add_argument("expected")
ap.add_argument("--rtol", type=float, default=1e-4)
ap.add_argument("--atol", type=float, default=1e-5)
a = ap.parse_args()
got, exp = np.load(a.got), np.load(a.expected)
if got.shape != exp.shape or got.dtype != exp.dtype:
    sys.exit(f"mismatch: got {got.dtype}{list(got.shape)}, expected {exp.dtype}{list(exp.shape)}")
if not np.allclose(got, exp, rtol=a.rtol, atol=a.atol, equal_nan=True):
    err = np.abs(got.astype(np.float64) - exp.astype(np.float64))
    i = np.unravel_index(np.argmax(err), err.shape)
    sys.exit(f"values differ: max abs error {err.max():.3g} at {list(i)} (got {got[i]}, expected {exp[i]})")
print(f"ok: max abs error {np.abs(got.astype(np.float64) - exp.astype(np.float64)).max():.3g}")
