#!/usr/bin/env python3
# bench/torch_backend.py: torch.compile(model, backend="primc") against PyTorch eager and torch.compile's default
# backend (inductor) on torchvision's ResNet-18 (1x3x224x224) and a Hugging Face BERT-base built from its default
# config (batch 1, seq 128, a padding mask), inference under torch.no_grad(). The three run in interleaved rounds
# on the same threads (torch.set_num_threads; primc modules take torch.get_num_threads()); each figure is the
# median of a round's runs, and the table gives each model's best round and primc's ratio to each peer. Compile
# times (the first call) are printed too. Needs PyPI torch 2.x, torchvision and transformers (tools/setup.sh bench).
# Usage: python3 bench/torch_backend.py [--threads 1,2] [--rounds 3] [--runs 10] [--models resnet18,bert_base]
import argparse
import os
import platform
import statistics
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
import primc.torch  # noqa: E402,F401  (registers backend="primc" when running from the source tree)
from torch_threads import set_threads  # noqa: E402  (torch's BLAS pool too)


def cpu_name():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


def models(names):
    torch.manual_seed(0)
    out = {}
    if "resnet18" in names:
        import torchvision

        out["resnet18"] = (torchvision.models.resnet18().eval(), (torch.randn(1, 3, 224, 224),), {})
    if "bert_base" in names:
        import transformers

        m = transformers.BertModel(transformers.BertConfig()).eval()
        ids = torch.randint(0, 30522, (1, 128))
        mask = torch.ones(1, 128, dtype=torch.long)
        mask[0, 100:] = 0
        out["bert_base"] = (m, (), {"input_ids": ids, "attention_mask": mask})
    return out


def timed(fn, args, kwargs, runs):
    ts = []
    for _ in range(runs):
        t = time.perf_counter()
        fn(*args, **kwargs)
        ts.append((time.perf_counter() - t) * 1e3)
    return statistics.median(ts)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", default="1")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--models", default="resnet18,bert_base")
    a = ap.parse_args()
    print("CPU: %s; torch %s; %d rounds of %d runs, interleaved" % (cpu_name(), torch.__version__, a.rounds, a.runs))
    for threads in [int(t) for t in a.threads.split(",")]:
        set_threads(threads)
        for name, (m, args, kwargs) in models(a.models.split(",")).items():
            torch._dynamo.reset()
            with torch.no_grad():
                peers = {"eager": m}
                compile_s = {}
                for peer, backend in (("inductor", "inductor"), ("primc", "primc")):
                    fn = torch.compile(m, backend=backend)
                    t = time.perf_counter()
                    fn(*args, **kwargs)
                    compile_s[peer] = time.perf_counter() - t
                    peers[peer] = fn
                for fn in peers.values():  # warm up
                    fn(*args, **kwargs)
                best = {p: float("inf") for p in peers}
                for _ in range(a.rounds):
                    for p, fn in peers.items():
                        best[p] = min(best[p], timed(fn, args, kwargs, a.runs))
            print("%-10s %d thread%s: eager %.2f ms, inductor %.2f ms, primc %.2f ms; primc/eager %.2f, "
                  "primc/inductor %.2f (first call: inductor %.1f s, primc %.1f s)"
                  % (name, threads, "" if threads == 1 else "s", best["eager"], best["inductor"], best["primc"],
                     best["primc"] / best["eager"], best["primc"] / best["inductor"], compile_s["inductor"],
                     compile_s["primc"]), flush=True)


if __name__ == "__main__":
    main()
