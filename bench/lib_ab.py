#!/usr/bin/env python3
# bench/lib_ab.py: A/B timing of models compiled as shared libraries, call by call in one process with an ONNX
# Runtime session as the control, for a VM whose speed moves between minutes (bench/extended.md): every build and
# ORT see the same minute. Each iteration calls every library's NAME_run and then ORT, REPS times each, on
# MODEL_DIR's model.onnx and input.npy (one input). Prints per library and ORT the least and median time, the
# medians over ORT's fast and slow iterations (ORT under 1.08x and over 1.15x its 10th percentile) and their
# ratio (how much the slow minutes cost each), and the median of each library's time over the first's in the same
# iteration (paired).
# Usage: python3 bench/lib_ab.py ITERS MODEL_DIR REPS LIB.so [LIB.so ...]
#   each LIB.so from `primc compile MODEL --emit lib -o LIB.so --name m` (its header LIB.h beside it); run it
#   pinned with one thread: PRIMC_NUM_THREADS=1 taskset -c 1 python3 bench/lib_ab.py ...
import ctypes
import re
import statistics as st
import sys
import time

import numpy as np


def speed_split(times):
    """the indices of a control's fast and slow iterations: under 1.08x and over 1.15x its 10th percentile (this
    VM's two speeds; bench/extended.md)"""
    lo = sorted(times)[len(times) // 10]
    return [i for i, v in enumerate(times) if v < lo * 1.08], [i for i, v in enumerate(times) if v > lo * 1.15]


def main():
    import onnxruntime as ort
    iters, d, reps, libs = int(sys.argv[1]), sys.argv[2], int(sys.argv[3]), sys.argv[4:]
    x = np.ascontiguousarray(np.load(d + "/input.npy"))
    so = ort.SessionOptions()
    so.intra_op_num_threads = so.inter_op_num_threads = 1
    s = ort.InferenceSession(d + "/model.onnx", so, providers=["CPUExecutionProvider"])
    feed = {s.get_inputs()[0].name: x}
    ref = s.run(None, feed)[0]
    calls, keep = [], []
    for path in libs:
        h = open(path[:-3] + ".h").read()
        name = re.search(r"#define (\w+)_WORKSPACE_SIZE (\d+)", h)
        n_out = int(re.search(r"_OUTPUT0_NUMEL (\d+)", h).group(1))
        lib = ctypes.CDLL(path)
        run = getattr(lib, name.group(1) + "_run")
        run.argtypes = [ctypes.c_void_p] * 3
        out = np.zeros(n_out, ref.dtype)
        ws = np.zeros(int(name.group(2)) + 4096, np.uint8)
        wp = ctypes.c_void_p((ws.ctypes.data + 4095) // 4096 * 4096)
        ins, outs = (ctypes.c_void_p * 1)(x.ctypes.data), (ctypes.c_void_p * 1)(out.ctypes.data)
        if run(ins, outs, wp):
            sys.exit(f"{path}: run failed")
        print(f"{path}: max abs error against ONNX Runtime {float(np.abs(out - ref.reshape(-1)).max()):.3g}")
        keep.append((lib, out, ws, ins, outs))
        calls.append((path, lambda run=run, ins=ins, outs=outs, wp=wp: [run(ins, outs, wp) for _ in range(reps)]))
    calls.append(("ort", lambda: [s.run(None, feed) for _ in range(reps)]))
    t = {n: [] for n, _ in calls}
    for _ in range(iters):
        for n, f in calls:
            t0 = time.perf_counter()
            f()
            t[n].append((time.perf_counter() - t0) / reps * 1e3)
    fast, slow = speed_split(t["ort"])
    print(f"ORT's fast iterations {len(fast)}, slow {len(slow)} of {iters}")
    a = t[libs[0]]
    for n, _ in calls:
        f = st.median(t[n][i] for i in fast) if fast else float("nan")
        sl = st.median(t[n][i] for i in slow) if slow else float("nan")
        paired = st.median(t[n][i] / a[i] for i in range(iters))
        print(f"{n:28s} least {min(t[n]):8.3f} ms  median {st.median(t[n]):8.3f} | fast {f:8.3f} slow {sl:8.3f} "
              f"slow/fast {sl / f:.2f} | paired / first {paired:.3f}")


if __name__ == "__main__":
    main()
