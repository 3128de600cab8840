#!/usr/bin/env python3
# bench/ort_profile.py: ONNX Runtime's per-node time (its session profiler), to set beside primc's --profile.
# Usage: python3 bench/ort_profile.py MODEL_DIR RUNS THREADS [TOP]  (MODEL_DIR holds model.onnx and input.npy);
# prints ms per run of each node, slowest first, and the total.
import sys, json, os, collections, tempfile, numpy as np, onnxruntime as ort
d, runs, thr = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
so = ort.SessionOptions(); so.intra_op_num_threads = thr; so.inter_op_num_threads = 1
so.enable_profiling = True; so.profile_file_prefix = os.path.join(tempfile.gettempdir(), 'ort_profile')
s = ort.InferenceSession(d + '/model.onnx', so, providers=['CPUExecutionProvider'])
x = np.load(d + '/input.npy'); feed = {s.get_inputs()[0].name: x}
for _ in range(5): s.run(None, feed)
for _ in range(runs): s.run(None, feed)
f = s.end_profiling(); ev = json.load(open(f)); os.remove(f)
tot = collections.defaultdict(float); op = {}
for e in ev:
    if e.get('cat') == 'Node' and e['name'].endswith('_kernel_time'):
        n = e['name'][:-12]; tot[n] += e['dur'] / 1000.0; op[n] = e['args'].get('op_name', '')
allms = sum(tot.values()) / (runs + 5)
for n, t in sorted(tot.items(), key=lambda kv: -kv[1])[:int(sys.argv[4]) if len(sys.argv) > 4 else 60]:
    print('%8.4f  %-14s %s' % (t / (runs + 5), op[n], n))
print('total %.4f ms/run' % allms)
