#!/usr/bin/env python3
# bench/precision_peers.py: primc's --matmul-precision highest/high/medium and --autocast bf16/fp16 builds against ONNX
# Runtime (f32) and
# OpenVINO at f32 and at its default precision (bf16 on an AMX or AVX512-BF16 CPU), timed interleaved in one
# run (the machines drift), with each output's error against ONNX Runtime's f32 output.
# Usage: python3 bench/precision_peers.py [--threads 1,2] [--runs 15] [--primc build/primc] [--base OTHER/primc]
#            [--builds highest,high,medium,autocast,autocast16] [--no-openvino] MODEL_DIR...
# --base: one more build, "base", by another primc (another commit's checkout) at its defaults, timed in the same
# rounds (before/after figures from one run).
# (each dir holds model.onnx and input.npy, as models/ and bench/gen_encoder.py write them)
import argparse
import atexit
import os
import re
import shutil
import statistics
import subprocess
import tempfile
import time

import numpy as np
import onnxruntime as ort

ort.set_default_logger_severity(3)

BUILDS = {"highest": [], "high": ["--matmul-precision", "high"], "medium": ["--matmul-precision", "medium"],
          "autocast": ["--autocast", "bf16"], "autocast16": ["--autocast", "fp16"]}


def cpu_line():
    name, flags = "?", set()
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name") and name == "?":
                name = line.split(":", 1)[1].strip()
            if line.startswith("flags"):
                flags = set(line.split(":", 1)[1].split())
    want = ["avx512f", "avx512_bf16", "avx512_fp16", "amx_bf16", "amx_int8", "avx512_vnni"]
    return f"{name}; {' '.join(w for w in want if w in flags) or 'no AVX-512'}"


def ort_session(path, threads):
    so = ort.SessionOptions()
    so.intra_op_num_threads, so.inter_op_num_threads = threads, 1
    return ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])


def timed(fn, runs):
    for _ in range(3):
        fn()
    ts = []
    for _ in range(runs):
        t = time.perf_counter()
        fn()
        ts.append((time.perf_counter() - t) * 1e3)
    return statistics.median(ts)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--runs", type=int, default=15)
    ap.add_argument("--primc", default="build/primc")
    ap.add_argument("--builds", default="highest,high,medium,autocast")
    ap.add_argument("--base", default="")
    ap.add_argument("--no-openvino", action="store_true")
    ap.add_argument("dirs", nargs="+")
    a = ap.parse_args()
    try:
        import openvino as ov
        core = None if a.no_openvino else ov.Core()
    except ImportError:
        ov = core = None
    print(f"CPU: {cpu_line()}")
    tmp = tempfile.mkdtemp(prefix="primc_prec_")
    atexit.register(shutil.rmtree, tmp, ignore_errors=True)  # the builds: up to 1 GB a run
    for d in a.dirs:
        name = os.path.basename(d.rstrip("/"))
        x = np.load(os.path.join(d, "input.npy"))
        model = os.path.join(d, "model.onnx")
        exes = {}
        for p in a.builds.split(","):
            exes[p] = os.path.join(tmp, f"{name}_{p}")
            subprocess.run([a.primc, "compile", model, *BUILDS[p], "-o", exes[p], "--quiet"], check=True)
        if a.base:
            exes["base"] = os.path.join(tmp, f"{name}_base")
            subprocess.run([a.base, "compile", model, "-o", exes["base"], "--quiet"], check=True)
        ref_sess = ort_session(model, 1)
        in_name = ref_sess.get_inputs()[0].name
        ref = ref_sess.run(None, {in_name: x})[0]
        errs = {}
        for p, e in exes.items():
            out = os.path.join(tmp, f"{name}_{p}_out")
            subprocess.run([e, os.path.join(d, "input.npy"), "-o", out], check=True, capture_output=True)
            got = np.load(os.path.join(out, "out0.npy"))
            errs[p] = float(np.abs(got - ref).max() / np.abs(ref).max())
        for threads in [int(t) for t in a.threads.split(",")]:
            peers = {}
            s = ort_session(model, threads)
            peers["ORT f32"] = lambda s=s: s.run(None, {in_name: x})
            if core:
                for label, hint in (("OpenVINO f32", "f32"), ("OpenVINO default", None)):
                    cfg = {"INFERENCE_NUM_THREADS": threads}
                    if hint:
                        cfg["INFERENCE_PRECISION_HINT"] = hint
                    try:
                        cm = core.compile_model(model, "CPU", cfg)
                    except RuntimeError as e:  # OpenVINO refuses some of ONNX Runtime's own quantized forms
                        print(f"{name}: OpenVINO refuses it: {str(e).splitlines()[-1]}")
                        break
                    req = cm.create_infer_request()
                    if label == "OpenVINO default":
                        peers["OpenVINO precision"] = cm.get_property("INFERENCE_PRECISION_HINT")
                        ov_out = req.infer({0: x})[cm.outputs[0]]
                        errs["OpenVINO default"] = float(np.abs(ov_out - ref).max() / np.abs(ref).max())
                    peers[label] = lambda req=req: req.infer({0: x})
            ov_prec = peers.pop("OpenVINO precision", None)
            res = {k: [] for k in list(exes) + list(peers)}
            for _ in range(3):  # rounds, each timing every build and peer once, in turn
                for p, e in exes.items():
                    time.sleep(0.5)  # a peer's spinning pool must not take the cores of the next one timed
                    env = dict(os.environ, PRIMC_NUM_THREADS=str(threads))
                    out = subprocess.run([e, os.path.join(d, "input.npy"), "--bench", str(a.runs)], capture_output=True,
                                         text=True, env=env).stdout
                    res[p].append(float(re.search(r"median ([0-9.]+) ms", out).group(1)))
                for k, fn in peers.items():
                    time.sleep(0.5)
                    res[k].append(timed(fn, a.runs))
            best = {k: min(v) for k, v in res.items()}
            print(f"\n{name}, {threads} thread(s): median latency, best of 3 interleaved rounds"
                  + (f" (OpenVINO's default precision here: {ov_prec})" if ov_prec else ""))
            print("| build | ms | vs primc highest | vs OpenVINO default | max err / max |ref| (vs ORT f32) |")
            print("| --- | ---: | ---: | ---: | ---: |")
            for k, v in best.items():
                ovd = best.get("OpenVINO default")
                e = errs.get(k)
                vs_f32 = f"{best['highest'] / v:.2f}x" if "highest" in best else "-"
                print(f"| {'primc ' + k if k in exes else k} | {v:.2f} | {vs_f32} | "
                      f"{(f'{v / ovd:.2f}' if ovd else '-')} | {('%.1e' % e) if e is not None else '-'} |")


if __name__ == "__main__":
    main()
