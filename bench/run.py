#!/usr/bin/env python3
# bench/run.py: times primc against ONNX Runtime, PyTorch eager and torch.compile on the model zoo, same inputs,
# same thread counts, in one run; writes bench/results.md and bench/results.png.
# Usage: python3 bench/run.py [--threads 1,2] [--runs N] [--models a,b] [--peers primc,ort,eager,compile]
#            [--primc build/primc] [--out bench/results.md]
# Models: models/*/, models/large/*/ and models/extended/*/ (make models; the extended zoo: models/export.py
# --extended). The headline geometric mean is over the models ONNX Runtime takes 1 ms or more for; below that
# its Python call is a large part of what is timed, so those are summed up apart.
import argparse
import glob
import math
import os
import re
import statistics
import subprocess
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "models"))


def timed_runs(fn, runs, warmup=3):
    for _ in range(warmup):
        fn()
    ts = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        ts.append((time.perf_counter() - t0) * 1e3)
    return min(ts), statistics.median(ts)


def model_dirs(selected):
    dirs = sorted(glob.glob(os.path.join(ROOT, "models", "*", "model.onnx")) +
                  glob.glob(os.path.join(ROOT, "models", "large", "*", "model.onnx")) +
                  glob.glob(os.path.join(ROOT, "models", "extended", "*", "model.onnx")))
    out = [os.path.dirname(p) for p in dirs]
    if selected:
        out = [d for d in out if os.path.basename(d) in selected]
    return out


# The previous peer's worker threads spin for a while after its last run (OpenMP's and ONNX Runtime's
# pools): wait them out so that the next tool timed gets the cores it asked for. After PyTorch, half a
# second is not enough: a 2-thread primc run of resnet_tiny 0.5-1.0 s after 200 torch runs in this
# process took 0.077 ms (in 7 of 10 tries), 2 s after 0.051 (in 5 of 5), as without torch.
SETTLE_S = 0.5
TORCH_SETTLE_S = 2.5
TORCH_PEERS = ("eager", "compile")


def settle(seconds=SETTLE_S):
    time.sleep(seconds)


# Each peer is set up once (compiled, sessions made) and then timed in ROUNDS interleaved rounds of
# RUNS / ROUNDS runs: on a shared machine whose speed drifts over minutes, a peer timed in one block could
# land in a slow or a fast phase the others missed. Per peer and thread count: the min over all rounds and
# the median of the rounds' medians.
ROUNDS = 3


def primc_timer(primc, d, name, outdir):
    exe = os.path.join(outdir, name)
    t0 = time.perf_counter()
    r = subprocess.run([primc, "compile", os.path.join(d, "model.onnx"), "-o", exe], capture_output=True, text=True)
    compile_s = time.perf_counter() - t0
    if r.returncode != 0:
        return {"error": (r.stderr or r.stdout).strip().splitlines()[-1:] or ["compile failed"]}, None
    info = {"compile_s": compile_s, "size_kb": os.path.getsize(exe) / 1024}

    def run(t, runs):
        env = dict(os.environ, PRIMC_NUM_THREADS=str(t))
        r = subprocess.run([exe, os.path.join(d, "input.npy"), "--bench", str(runs)], capture_output=True, text=True,
                           env=env)
        mn = re.search(r"min[^0-9]*([0-9.]+)\s*ms", r.stdout)
        md = re.search(r"median[^0-9]*([0-9.]+)\s*ms", r.stdout)
        return (float(mn.group(1)), float(md.group(1))) if r.returncode == 0 and mn and md else None
    return info, run


def ort_timer(d, threads):
    try:
        import onnxruntime as ort
    except ImportError:
        return None
    x = np.load(os.path.join(d, "input.npy"))
    binds = {}
    for t in threads:
        so = ort.SessionOptions()
        so.intra_op_num_threads = t
        so.inter_op_num_threads = 1
        sess = ort.InferenceSession(os.path.join(d, "model.onnx"), so, providers=["CPUExecutionProvider"])
        # IOBinding with the input bound once: the least Python per call that ORT offers, so that small
        # models time ORT's kernels rather than the feed dictionary's conversion
        b = sess.io_binding()
        b.bind_cpu_input(sess.get_inputs()[0].name, x)
        for o in sess.get_outputs():
            b.bind_output(o.name, "cpu")
        binds[t] = (sess, b)
    return lambda t, runs: timed_runs(lambda: binds[t][0].run_with_iobinding(binds[t][1]), runs)


def torch_timer(name, d, compiled):
    try:
        import torch
        import export
        from torch_threads import set_threads
    except Exception:
        return None
    if name not in export.MODELS:
        return None
    ctor, _, _ = export.MODELS[name]
    torch.manual_seed(0)
    model = ctor().eval()
    x = torch.from_numpy(np.load(os.path.join(d, "input.npy")))
    if compiled:
        if not hasattr(torch, "compile"):
            return None
        model = torch.compile(model)

    def run(t, runs):
        set_threads(t)
        with torch.no_grad():
            return timed_runs(lambda: model(x), runs)
    return run


def interleaved(timers, threads, runs):
    """{peer: {threads: (min, median of round medians)}} over ROUNDS rounds, peers in turn each round"""
    per = max(5, -(-runs // ROUNDS))
    got = {k: {t: [] for t in threads} for k, f in timers.items() if f}
    prev = TORCH_PEERS[0]  # the previous model's last peer may have been PyTorch
    for _ in range(ROUNDS):
        for k, f in timers.items():
            for t in threads if f else []:
                settle(TORCH_SETTLE_S if prev in TORCH_PEERS and k not in TORCH_PEERS else SETTLE_S)
                prev = k
                v = f(t, per)
                if v:
                    got[k][t].append(v)
    out = {}
    for k, f in timers.items():
        out[k] = None if not f else {t: (min(v[0] for v in got[k][t]), statistics.median(v[1] for v in got[k][t]))
                                     if got[k][t] else None for t in threads}
    return out


def corelat(exe):
    """a cache line's round trip between CPUs 0 and 1 in ns (bench/corelat.c), None where it cannot run"""
    try:
        r = subprocess.run([exe], capture_output=True, text=True, timeout=10)
        return int(r.stdout.strip()) if r.returncode == 0 else None
    except (OSError, ValueError, subprocess.TimeoutExpired):
        return None


def fmt(v):
    return "missing" if v is None else f"{v[0]:.3f} / {v[1]:.3f}"


def fmt_lat(v):
    return " / ".join("-" if x is None else str(x) for x in v) if v else "-"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--runs", type=int, default=50)
    ap.add_argument("--models", default="")
    ap.add_argument("--primc", default=os.path.join(ROOT, "build", "primc"))
    ap.add_argument("--corelat", default=os.path.join(ROOT, "build", "corelat"))
    ap.add_argument("--peers", default="primc,ort,eager,compile")
    ap.add_argument("--out", default=os.path.join(HERE, "results.md"))
    a = ap.parse_args()
    peers = set(a.peers.split(","))
    threads = [int(t) for t in a.threads.split(",")]
    outdir = os.path.join(HERE, "out")
    os.makedirs(outdir, exist_ok=True)
    rows = []
    for d in model_dirs(set(filter(None, a.models.split(",")))):
        name = os.path.basename(d)
        print(f"== {name}", flush=True)
        info, prun = primc_timer(a.primc, d, name, outdir)
        lat0 = corelat(a.corelat)
        r = interleaved({"primc": prun, "ort": "ort" in peers and ort_timer(d, threads),
                         "eager": "eager" in peers and torch_timer(name, d, False),
                         "compile": "compile" in peers and torch_timer(name, d, True)}, threads, a.runs)
        info["corelat"] = (lat0, corelat(a.corelat))
        print(f"  core-to-core round trip before / after: {fmt_lat(info['corelat'])} ns", flush=True)
        p = dict(info)
        p.update(r["primc"] or {})
        o, te, tc = r["ort"], r["eager"], r["compile"]
        rows.append((name, p, o, te, tc))
        for t in threads:
            print(f"  {t} thread(s): primc {fmt(p.get(t))}  ort {fmt(o and o[t])}  "
                  f"torch {fmt(te and te[t])}  torch.compile {fmt(tc and tc[t])}", flush=True)
    write_results(rows, threads, a.out)


def cpu_name():
    try:
        from precision_peers import cpu_line
        return cpu_line()
    except ImportError:
        return "?"


def geomean(rs):
    return math.exp(sum(math.log(r) for r in rs) / len(rs))


# ONNX Runtime's median latency from which a model counts in the headline
HEADLINE_MS = 1.0


def write_results(rows, threads, out):
    lines = ["# primc benchmark", "", f"{time.strftime('%Y-%m-%d')}, {cpu_name()}, {os.cpu_count()} cores "
             "(min / median latency in ms over repeated runs after warm-up, the peers timed in turn in %d interleaved "
             "rounds: the min over all runs and the median of the rounds' medians; ratio = primc median / ONNX Runtime "
             "median, below 1 means primc is faster (min ratio: the same of the minima, steadier on a machine whose speed swings); cores ns = a cache line's round trip between CPUs 0 and 1 "
             "before / after the model's runs, bench/corelat.c: on a VM whose two vCPUs the host sometimes places "
             "far apart, it tells which 2-thread figures were taken so)" % ROUNDS, ""]
    for t in threads:
        lines += [f"## {t} thread(s)", "",
                  "| model | primc | ONNX Runtime | ratio | min ratio | PyTorch eager | torch.compile | primc compile s "
                  "| binary KiB | cores ns |",
                  "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
        ratios, tiny, min_ratios = [], [], []
        for name, p, o, te, tc in rows:
            pv = p.get(t) if p else None
            ov = o[t] if o else None
            ratio = pv[1] / ov[1] if pv and ov else None
            min_ratio = pv[0] / ov[0] if pv and ov else None
            if ratio:
                (ratios if ov[1] >= HEADLINE_MS else tiny).append(ratio)
                if ov[1] >= HEADLINE_MS:
                    min_ratios.append(min_ratio)
            err = " ".join(p["error"]) if "error" in p else ""
            lines.append(f"| {name} | {fmt(pv) if not err else 'failed: ' + err} | {fmt(ov)} | "
                         f"{'%.2f' % ratio if ratio else '-'} | {'%.2f' % min_ratio if min_ratio else '-'} | "
                         f"{fmt(te and te[t])} | {fmt(tc and tc[t])} | "
                         f"{'%.2f' % p['compile_s'] if 'compile_s' in p else '-'} | "
                         f"{'%.0f' % p['size_kb'] if 'size_kb' in p else '-'} | {fmt_lat(p.get('corelat'))} |")
        if ratios:
            lines += ["", f"geometric mean ratio over the {len(ratios)} models of {HEADLINE_MS:g} ms or more in ONNX "
                      f"Runtime: **{geomean(ratios):.2f}** (slowest {max(ratios):.2f}; of the minima {geomean(min_ratios):.2f}, "
                      f"slowest {max(min_ratios):.2f})"]
        if tiny:
            lines += ["", f"apart, {len(tiny)} models under {HEADLINE_MS:g} ms, where ONNX Runtime's Python call weighs: "
                      f"geometric mean {geomean(tiny):.2f}"]
        lines.append("")
    with open(out, "w") as f:
        f.write("\n".join(lines))
    print("\n".join(lines))
    plot(rows, threads, os.path.splitext(out)[0] + ".png")


def plot(rows, threads, path):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib missing: no chart")
        return
    fig, axes = plt.subplots(1, len(threads), figsize=(6 * len(threads), 4), squeeze=False)
    for ax, t in zip(axes[0], threads):
        names, ratios = [], []
        for name, p, o, _, _ in rows:
            pv, ov = (p.get(t) if p else None), (o[t] if o else None)
            if pv and ov:
                names.append(name)
                ratios.append(pv[1] / ov[1])
        ax.bar(names, ratios)
        ax.axhline(1.0, color="k", lw=0.8)
        ax.set_title(f"primc / ONNX Runtime latency, {t} thread(s)")
        ax.tick_params(axis="x", rotation=45)
    fig.tight_layout()
    fig.savefig(path, dpi=100)


if __name__ == "__main__":
    main()
