#!/usr/bin/env python3
# bench/train_ab.py: a training step compiled by `primc compile --train --emit lib` and the same step in PyTorch
# eager, alternated step by step in one process, so that both see the same minute of a VM whose speed moves between
# minutes (bench/train.md: medians of whole rounds in turn gave the encoder 0.75 to 0.99 of eager in one hour).
# The models, batches, losses and optimizers are train_peers.py's. The compiled step runs through its NAME_model
# descriptor: data inputs (the batch, the labels), then the state (weights and optimizer buffers, started from the
# descriptor's initial values and passed from each step to the next, in place where NAME_STATE_IN_PLACE allows).
# Prints per side the least and median step, the median of the per-step ratios primc / eager (paired: each pair ran
# back to back, which goes first alternating), and that median over eager's fast and slow steps (lib_ab.speed_split:
# eager under 1.08x and over 1.15x its 10th percentile), as bench/lib_ab.py does for inference.
# Usage: /usr/bin/python3 bench/train_ab.py [--models encoder,resnet18] [--iters 40] [--threads 1] [--primc PATH]
#   [--autocast bf16]: primc's step compiled --autocast bf16 against eager's forward under torch.autocast bf16
#   pin it: taskset -c 1 for 1 thread. At 2 threads torch's OpenMP threads sleep when idle (OMP_WAIT_POLICY
#   PASSIVE, set here before torch loads), else they spin through primc's steps.
import argparse
import atexit
import ctypes
import os
import shutil
import statistics as st
import sys
import tempfile
import time

ap = argparse.ArgumentParser()
ap.add_argument("--models", default="encoder,resnet18")
ap.add_argument("--iters", type=int, default=40)
ap.add_argument("--threads", type=int, default=1)
ap.add_argument("--primc", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "build", "primc"))
ap.add_argument("--autocast", choices=["bf16"],
                help="primc's step under --autocast bf16, eager's forward under torch.autocast bf16")
A = ap.parse_args()
os.environ["PRIMC_NUM_THREADS"] = str(A.threads)  # read when the library's thread pool starts
if A.threads > 1:
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import numpy as np  # noqa: E402
import torch  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import train_peers as tp  # noqa: E402
from lib_ab import speed_split  # noqa: E402

# primc_dtype codes (runtime/primc_rt.h) of the dtypes a step's inputs and state take
DTYPES = {0: np.float16, 2: np.float32, 3: np.float64, 4: np.int8, 6: np.int32, 7: np.int64, 8: np.uint8, 9: np.bool_}


class TensorDesc(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char_p), ("dtype", ctypes.c_int32), ("rank", ctypes.c_int32),
                ("dims", ctypes.c_int64 * 8)]


class StateDesc(ctypes.Structure):
    _fields_ = [("n", ctypes.c_int32), ("n_weights", ctypes.c_int32), ("init", ctypes.POINTER(ctypes.c_void_p)),
                ("in_place", ctypes.c_int32)]


class ModelDesc(ctypes.Structure):  # primc_model_desc
    _fields_ = [("name", ctypes.c_char_p), ("run", ctypes.c_void_p), ("load_weights", ctypes.c_void_p),
                ("workspace_size", ctypes.c_int64), ("workspace_align", ctypes.c_int64),
                ("n_inputs", ctypes.c_int32), ("n_outputs", ctypes.c_int32),
                ("inputs", ctypes.POINTER(TensorDesc)), ("outputs", ctypes.POINTER(TensorDesc)),
                ("profile", ctypes.c_void_p), ("output_dims", ctypes.c_void_p), ("dims", ctypes.c_void_p),
                ("run_dims", ctypes.c_void_p), ("state", ctypes.POINTER(StateDesc))]


def array(t):
    return np.zeros(tuple(t.dims[k] for k in range(t.rank)), DTYPES[t.dtype])


class Step:
    """the compiled step: step() runs it once on (x, y), the state carried over; loss() the last step's loss"""

    def __init__(self, so, x, y):
        self.lib = ctypes.CDLL(so)
        m = ModelDesc.in_dll(self.lib, "step_model")
        s = m.state.contents
        n_data = m.n_inputs - s.n
        if n_data != 2:
            raise SystemExit(f"{so}: {n_data} data inputs, expected the batch and its labels")
        data = [np.ascontiguousarray(v.numpy()).astype(DTYPES[m.inputs[i].dtype]) for i, v in enumerate((x, y))]
        self.state = [[array(m.inputs[n_data + i]) for i in range(s.n)]]
        for i in range(s.n):
            if s.init[i]:
                ctypes.memmove(self.state[0][i].ctypes.data, s.init[i], self.state[0][i].nbytes)
        self.state.append(self.state[0] if s.in_place else [a.copy() for a in self.state[0]])
        self.outs = [array(m.outputs[i]) for i in range(m.n_outputs - s.n)]
        align = max(int(m.workspace_align), 4096)
        self.ws_buf = np.zeros(int(m.workspace_size) + align, np.uint8)
        self.ws = ctypes.c_void_p((self.ws_buf.ctypes.data + align - 1) // align * align)
        self.run = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p)(m.run)
        self.data, self.cur, self.n = data, 0, s.n

    def step(self):
        ins = [a.ctypes.data for a in self.data] + [a.ctypes.data for a in self.state[self.cur]]
        outs = [a.ctypes.data for a in self.outs] + [a.ctypes.data for a in self.state[1 - self.cur]]
        iv = (ctypes.c_void_p * len(ins))(*ins)
        ov = (ctypes.c_void_p * len(outs))(*outs)
        if self.run(iv, ov, self.ws):
            raise SystemExit("the compiled step failed")
        self.cur = 1 - self.cur

    def loss(self):
        return float(self.outs[0].reshape(-1)[0])


def main():
    cpu = next((ln.split(":", 1)[1].strip() for ln in open("/proc/cpuinfo") if ln.startswith("model name")), "?")
    print(f"# training step, primc and eager alternated step by step in one process; {cpu}, {A.threads} thread(s), "
          f"torch {torch.__version__}" + (f", autocast {A.autocast}" if A.autocast else ""))
    tp.set_threads(A.threads)
    tmp = tempfile.mkdtemp(prefix="primc-train-ab-")
    atexit.register(shutil.rmtree, tmp, ignore_errors=True)  # the builds: up to 1 GB a run
    for key in A.models.split(","):
        name, model, x, y, loss, opt, make_opt = tp.case(key)
        d = os.path.join(tmp, key)
        so = os.path.join(d, "step.so")
        tp.compile_step(A.primc, d, model, x, y, loss, opt, ["--emit", "lib", "--name", "step", "-o", so] +
                        (["--autocast", A.autocast] if A.autocast else []))
        ours, eager = Step(so, x, y), tp.torch_step(model, x, y, loss, make_opt, autocast=bool(A.autocast))
        for _ in range(3):
            ours.step(), eager()
        t = {"primc": [], "eager": []}
        for it in range(A.iters):
            order = [("primc", ours.step), ("eager", eager)]
            for side, fn in order if it % 2 == 0 else order[::-1]:
                t0 = time.perf_counter()
                fn()
                t[side].append(1e3 * (time.perf_counter() - t0))
        ratio = [p / e for p, e in zip(t["primc"], t["eager"])]
        fast, slow = ([ratio[i] for i in ix] for ix in speed_split(t["eager"]))
        line = (f"{name}: primc least {min(t['primc']):.1f} median {st.median(t['primc']):.1f} ms, eager least "
                f"{min(t['eager']):.1f} median {st.median(t['eager']):.1f} ms; primc / eager paired median "
                f"{st.median(ratio):.3f} over {len(ratio)} pairs")
        line += f", in eager's fast steps {st.median(fast):.3f} ({len(fast)})" if fast else ""
        line += f", slow {st.median(slow):.3f} ({len(slow)})" if slow else ""
        print(line + f"; loss after {A.iters + 3} steps primc {ours.loss():.5f}", flush=True)


if __name__ == "__main__":
    main()
