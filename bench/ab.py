#!/usr/bin/env python3
# bench/ab.py: A/B timing of primc builds (and ONNX Runtime), interleaved in one run on a noisy shared machine.
# Usage: python3 bench/ab.py [--threads N] [--rounds R] [--no-ort] [--flags 'F...'] RUNS primcA[,primcB...] MODEL_DIR...
#   each dir holds model.onnx and input.npy; each build compiles each model (-O2, then F: --autocast bf16, say), then R rounds (default 3) run
#   every executable with --bench RUNS (order reversed every other round) and ONNX Runtime for RUNS runs, at N
#   threads (default 1). Prints per build the least and the median of the rounds' medians, and for two or more
#   builds the median over rounds of each build's median divided by the first build's in the same round (paired:
#   the machine's drift between rounds cancels).
import os
import re
import statistics
import subprocess
import sys
import time

import numpy as np

args = sys.argv[1:]
threads, rounds, use_ort, flags = 1, 3, True, []
while args and args[0].startswith("--"):
    if args[0] == "--threads":
        threads, args = int(args[1]), args[2:]
    elif args[0] == "--rounds":
        rounds, args = int(args[1]), args[2:]
    elif args[0] == "--no-ort":
        use_ort, args = False, args[1:]
    elif args[0] == "--flags":
        flags, args = args[1].split(), args[2:]
    else:
        sys.exit("unknown option " + args[0])
if len(args) < 3:
    sys.exit("usage: bench/ab.py [--threads N] [--rounds R] [--no-ort] [--flags 'COMPILE FLAGS'] RUNS primcA[,primcB...] "
             "MODEL_DIR...")
runs, primcs, dirs = int(args[0]), args[1].split(","), args[2:]
env = dict(os.environ, PRIMC_NUM_THREADS=str(threads))


def ort_runner(d):
    import onnxruntime as ort
    so = ort.SessionOptions()
    so.intra_op_num_threads, so.inter_op_num_threads = threads, 1
    s = ort.InferenceSession(d + "/model.onnx", so, providers=["CPUExecutionProvider"])
    b = s.io_binding()
    b.bind_cpu_input(s.get_inputs()[0].name, np.load(d + "/input.npy"))
    for o in s.get_outputs():
        b.bind_output(o.name, "cpu")

    def run():
        for _ in range(2):
            s.run_with_iobinding(b)
        ts = []
        for _ in range(runs):
            t = time.perf_counter()
            s.run_with_iobinding(b)
            ts.append((time.perf_counter() - t) * 1e3)
        return statistics.median(ts)
    return run


for d in dirs:
    name = os.path.basename(d.rstrip("/"))
    exes = []
    for i, p in enumerate(primcs):
        e = "/tmp/bench_ab_%s_%d" % (name, i)
        subprocess.run([p, "compile", d + "/model.onnx", "-O2", *flags, "-o", e], check=True, stdout=subprocess.DEVNULL)
        exes.append(e)
    ort_run = ort_runner(d) if use_ort else None
    res = [[] for _ in exes]
    ort_ms = []
    for r in range(rounds):
        for i in (range(len(exes)) if r % 2 == 0 else reversed(range(len(exes)))):
            out = subprocess.run([exes[i], d + "/input.npy", "--bench", str(runs)], capture_output=True, text=True,
                                 env=env).stdout
            res[i].append(float(re.search(r"median[^0-9]*([0-9.]+)", out).group(1)))
        if ort_run:
            time.sleep(0.5)  # ONNX Runtime's pool spins a while after its last run: wait it out, as bench/run.py does
            ort_ms.append(ort_run())
            time.sleep(0.5)
    line = "%-16s" % name + "".join("  primc%d min %.3f med %.3f" % (i, min(v), statistics.median(v))
                                     for i, v in enumerate(res))
    if ort_ms:
        line += "  ort min %.3f med %.3f ms" % (min(ort_ms), statistics.median(ort_ms))
    for i in range(1, len(res)):
        line += "  primc%d/primc0 paired %.3f" % (i, statistics.median(res[i][k] / res[0][k] for k in range(rounds)))
    print(line, flush=True)
    for e in exes:  # a BERT-sized executable is 400 MB
        os.remove(e)
