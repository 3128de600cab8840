#!/usr/bin/env python3
# bench/vs_ort.py: primc (and optionally a baseline primc) against ONNX Runtime, interleaved round by round so that
# a shared machine's load hits all of them alike; wall medians per thread count, and CPU ms per inference on 1 thread.
# Usage: python3 bench/vs_ort.py [--primc build/primc] [--base OTHER_PRIMC] [--threads 1,2] [--runs N] [--rounds R] DIR...
import argparse
import os
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np


def child_cpu():
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def primc_round(exe, d, threads, runs):
    """wall median of `exe --bench runs`, and its CPU seconds per inference (startup cancelled by a 1-run call)"""
    env = dict(os.environ, PRIMC_NUM_THREADS=str(threads))
    inp = os.path.join(d, "input.npy")
    c0 = child_cpu()
    subprocess.run([exe, inp, "--bench", "1"], capture_output=True, env=env, check=True)
    c1 = child_cpu()
    r = subprocess.run([exe, inp, "--bench", str(runs + 1)], capture_output=True, text=True, env=env, check=True)
    c2 = child_cpu()
    med = float(re.search(r"median[^0-9]*([0-9.]+)\s*ms", r.stdout).group(1))
    return med, ((c2 - c1) - (c1 - c0)) / runs * 1e3


def ort_round(sess, feed, runs):
    for _ in range(3):
        sess.run(None, feed)
    ts, c0 = [], time.process_time()
    for _ in range(runs):
        t0 = time.perf_counter()
        sess.run(None, feed)
        ts.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(ts), (time.process_time() - c0) / runs * 1e3


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dirs", nargs="+", help="model directories holding model.onnx and input.npy")
    ap.add_argument("--primc", default="build/primc")
    ap.add_argument("--base", help="a second primc (e.g. a build of the commit before) timed in the same rounds")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args()
    import onnxruntime as ort

    variants = [("before", a.base)] if a.base else []
    variants.append(("primc", a.primc))
    tmp = tempfile.mkdtemp(prefix="vs_ort-")
    head = "| model | threads | " + " | ".join(f"{v} ms" for v, _ in variants) + " | ORT ms | " + \
        " | ".join(f"{v}/ORT" for v, _ in variants) + " |"
    rows = [head, "|" + " --- |" * (head.count("|") - 1)]
    cpu_rows = []
    for d in a.dirs:
        name = os.path.basename(os.path.normpath(d))
        exes = []
        for v, primc in variants:
            exe = os.path.join(tmp, f"{name}.{v}")
            subprocess.run([primc, "compile", os.path.join(d, "model.onnx"), "-o", exe], check=True, capture_output=True)
            exes.append(exe)
        x = np.load(os.path.join(d, "input.npy"))
        for t in [int(s) for s in a.threads.split(",")]:
            so = ort.SessionOptions()
            so.intra_op_num_threads = t
            so.inter_op_num_threads = 1
            sess = ort.InferenceSession(os.path.join(d, "model.onnx"), so, providers=["CPUExecutionProvider"])
            feed = {sess.get_inputs()[0].name: x}
            walls = [[] for _ in exes] + [[]]
            cpus = [[] for _ in exes] + [[]]
            for _ in range(a.rounds):
                for i, exe in enumerate(exes):
                    w, c = primc_round(exe, d, t, a.runs)
                    walls[i].append(w)
                    cpus[i].append(c)
                w, c = ort_round(sess, feed, a.runs)
                walls[-1].append(w)
                cpus[-1].append(c)
            best = [min(w) for w in walls]
            rows.append(f"| {name} | {t} | " + " | ".join(f"{b:.3f}" for b in best[:-1]) + f" | {best[-1]:.3f} | " +
                        " | ".join(f"{b / best[-1]:.2f}" for b in best[:-1]) + " |")
            if t == 1:
                cb = [min(c) for c in cpus]
                cpu_rows.append(f"| {name} | " + " | ".join(f"{c:.3f}" for c in cb[:-1]) + f" | {cb[-1]:.3f} | " +
                                " | ".join(f"{c / cb[-1]:.2f}" for c in cb[:-1]) + " |")
            print(rows[-1], flush=True)
    print("\nwall: best of %d rounds of the median of %d runs\n" % (a.rounds, a.runs))
    print("\n".join(rows))
    if cpu_rows:
        print("\nCPU ms per inference, 1 thread (robust to a loaded machine):\n")
        print("| model | " + " | ".join(f"{v} CPU ms" for v, _ in variants) + " | ORT CPU ms | " +
              " | ".join(f"{v}/ORT" for v, _ in variants) + " |")
        print("|" + " --- |" * (2 + 2 * len(variants)))
        print("\n".join(cpu_rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
