#!/usr/bin/env python3
# tests/compare_npy.py: compares an output .npy against a reference .npy; exit 0 when within tolerance.
# Usage: compare_npy.py GOT EXPECTED [--rtol R] [--atol A] [--normwise]
# Elementwise by default: |got - exp| <= atol + rtol |exp| everywhere. --normwise scales rtol by max |exp|
# instead: deep random-weight models (ResNet-50's logits reach ~1e3) cancel to near-zero outputs whose
# float32 rounding differs between any two correct implementations (ORT and primc's interpreter too).
import argparse
import sys

import numpy as np

ap = argparse.ArgumentParser()
ap.add_argument("got")
ap.add_argument("expected")
ap.add_argument("--rtol", type=float, default=1e-4)
ap.add_argument("--atol", type=float, default=1e-5)
ap.add_argument("--normwise", action="store_true")
a = ap.parse_args()
got, exp = np.load(a.got), np.load(a.expected)
if got.shape != exp.shape or got.dtype != exp.dtype:
    sys.exit(f"mismatch: got {got.dtype}{list(got.shape)}, expected {exp.dtype}{list(exp.shape)}")
scale = float(np.nanmax(np.abs(exp))) if a.normwise and exp.size else 0.0
within = (np.abs(got.astype(np.float64) - exp.astype(np.float64)) <= a.atol + a.rtol * scale) | \
    (np.isnan(got) & np.isnan(exp)) if a.normwise else np.isclose(got, exp, rtol=a.rtol, atol=a.atol, equal_nan=True)
if not np.all(within):
    err = np.abs(got.astype(np.float64) - exp.astype(np.float64))
    i = np.unravel_index(np.argmax(err), err.shape)
    sys.exit(f"values differ: max abs error {err.max():.3g} at {list(i)} (got {got[i]}, expected {exp[i]})")
err = np.abs(got.astype(np.float64) - exp.astype(np.float64)).max() if got.size else 0.0
print(f"ok: max abs error {err:.3g}" + (f", {err / scale:.2g} of max |expected| {scale:.3g}" if scale else ""))
