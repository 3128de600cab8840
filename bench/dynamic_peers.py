#!/usr/bin/env python3
# bench/dynamic_peers.py: one binary for a range of shapes (--dim NAME=LO..HI) against binaries compiled for exactly
# the size run, and against ONNX Runtime on the same dynamic model; timed interleaved in one run (the machines
# drift). Also each build's compile time and executable size.
# Models (random weights, bench/gen_encoder.py and bench/gen_resnet.py): BERT-base with its front (input_ids and
# attention_mask [batch, seq]), dynamic batch 1..8 and seq 1..512, run at batch 1 and seq 16, 128, 512; ResNet-50
# with batch 1..16, run at batch 1 and 8.
# Usage: python3 bench/dynamic_peers.py [--threads 1] [--runs 5] [--rounds 3] [--primc build/primc] [--dir DIR]
#            [--models bert,resnet50]
import argparse
import os
import statistics
import subprocess
import sys
import time

import numpy as np
import onnx

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from precision_peers import cpu_line, ort_session, timed  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))


def make_models(d):
    bert = os.path.join(d, "bert_dyn", "model.onnx")
    if not os.path.exists(bert):
        subprocess.run([sys.executable, os.path.join(HERE, "gen_encoder.py"), os.path.dirname(bert), "--dynamic",
                        "--embed", "30522"], check=True)
    r50 = os.path.join(d, "resnet50_dyn", "model.onnx")
    if not os.path.exists(r50):
        subprocess.run([sys.executable, os.path.join(HERE, "gen_resnet.py"), os.path.dirname(r50), "--depth", "50"],
                       check=True)
        m = onnx.load(r50)
        for v in list(m.graph.input) + list(m.graph.output):
            dim = v.type.tensor_type.shape.dim[0]
            dim.ClearField("dim_value")
            dim.dim_param = "N"
        onnx.save(m, r50)
    return bert, r50


def compile_exe(primc, model, dims, out):
    t = time.perf_counter()
    subprocess.run([primc, "compile", model, *dims, "-o", out, "--quiet"], check=True)
    return time.perf_counter() - t, os.path.getsize(out)


def exe_ms(exe, paths, runs, threads):
    env = dict(os.environ, PRIMC_NUM_THREADS=str(threads))
    r = subprocess.run([exe, *paths, "--bench", str(runs)], capture_output=True, text=True, env=env, check=True)
    line = [x for x in r.stdout.splitlines() if "median" in x][-1]
    return float(line.split("median")[1].split("ms")[0])


def inputs(d, tag, model, shape):
    """one .npy per input at shape: token ids and an all-ones mask, or normal floats"""
    sess = ort_session(model, 1)
    feeds, paths = {}, []
    rng = np.random.default_rng(0)
    for k, inp in enumerate(sess.get_inputs()):
        if "float" in inp.type:
            x = rng.standard_normal(shape).astype(np.float32)
        elif "mask" in inp.name:
            x = np.ones(shape, np.int64)
        else:
            x = rng.integers(0, 30522, shape).astype(np.int64)
        feeds[inp.name] = x
        paths.append(os.path.join(d, f"{tag}_in{k}.npy"))
        np.save(paths[-1], x)
    return feeds, paths


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--primc", default="build/primc")
    ap.add_argument("--dir", default="build/bench-models")
    ap.add_argument("--models", default="bert,resnet50")
    a = ap.parse_args()
    os.makedirs(a.dir, exist_ok=True)
    bert, r50 = make_models(a.dir)
    cases = []  # (label, model, dynamic dims, static dims, shape)
    if "bert" in a.models:
        for s in (16, 128, 512):
            cases.append((f"BERT-base seq {s}", bert, ["--dim", "batch=1..8", "--dim", "seq=1..512"],
                          ["--dim", "batch=1", "--dim", f"seq={s}"], (1, s)))
    if "resnet50" in a.models:
        for n in (1, 8):
            cases.append((f"ResNet-50 batch {n}", r50, ["--dim", "N=1..16"], ["--dim", f"N={n}"], (n, 3, 224, 224)))
    print(f"CPU: {cpu_line()}; {a.threads} thread(s); median of {a.runs} runs per round, median over {a.rounds} "
          "interleaved rounds")
    built = {}
    rows = []
    for label, model, dyn, static, shape in cases:
        key = (model, tuple(dyn))
        if key not in built:
            out = os.path.join(a.dir, os.path.basename(os.path.dirname(model)) + "_range")
            built[key] = (out, *compile_exe(a.primc, model, dyn, out))
        dyn_exe, dyn_s, dyn_bytes = built[key]
        st_exe = os.path.join(a.dir, "static_" + "_".join(str(x) for x in shape))
        st_s, st_bytes = compile_exe(a.primc, model, static, st_exe)
        feeds, paths = inputs(a.dir, "x", model, shape)
        sess = ort_session(model, a.threads)
        t = {"range": [], "exact": [], "ort": []}
        for _ in range(a.rounds):
            t["range"].append(exe_ms(dyn_exe, paths, a.runs, a.threads))
            t["exact"].append(exe_ms(st_exe, paths, a.runs, a.threads))
            t["ort"].append(timed(lambda: sess.run(None, feeds), a.runs))
        m = {k: statistics.median(v) for k, v in t.items()}
        rows.append((label, m, dyn_s, dyn_bytes, st_s, st_bytes))
        os.remove(st_exe)
    print(f"{'model':22} {'range ms':>9} {'exact ms':>9} {'ORT ms':>8} {'range/exact':>11} {'range/ORT':>9}   "
          "compile s (range / exact), executable MB")
    for label, m, dyn_s, dyn_bytes, st_s, st_bytes in rows:
        print(f"{label:22} {m['range']:9.2f} {m['exact']:9.2f} {m['ort']:8.2f} {m['range'] / m['exact']:11.3f} "
              f"{m['range'] / m['ort']:9.3f}   {dyn_s:5.1f} / {st_s:5.1f}, {dyn_bytes / 1e6:.1f} / {st_bytes / 1e6:.1f}")


if __name__ == "__main__":
    main()
