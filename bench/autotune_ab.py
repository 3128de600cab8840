#!/usr/bin/env python3
# bench/autotune_ab.py: the planner's conv rows against --autotune's, per kernel, on a noisy shared machine.
# Builds each model twice with --profile at PRIMC_NUM_THREADS=1 (the second with --autotune, reading or
# filling CACHE), runs the two alternately R times (--bench 1 --profile: one timed run after a warm-up run)
# and sums each kernel's fastest run: the model's time with the machine's load filtered out kernel by kernel.
# The convs whose row autotuning did not change are the control: their ratio is the noise.
# Usage: python3 bench/autotune_ab.py [--primc build/primc] [--cache FILE] R MODEL_DIR...
import sys, os, re, subprocess, math
args = sys.argv[1:]
primc, cache = 'build/primc', '/tmp/primc_autotune_ab.txt'
while args and args[0].startswith('--'):
    if args[0] == '--primc': primc = args[1]
    elif args[0] == '--cache': cache = args[1]
    else: sys.exit('unknown option ' + args[0])
    args = args[2:]
R, dirs = int(args[0]), args[1:]
env = dict(os.environ, PRIMC_NUM_THREADS='1')
tune = ['--autotune', '--autotune-cache', cache]

def parse(out):  # kernel -> ms per call, from the --profile table (..., calls, total ms, %, moved, min, median)
    d = {}
    for l in out.splitlines():
        p = l.split()
        if len(p) > 8 and re.fullmatch(r'k\d+', p[0]): d[p[0]] = float(p[-5]) / float(p[-6])
    return d

lr = []
for d in dirs:
    m = os.path.basename(d.rstrip('/')); exes, rows = [], []
    for i in range(2):
        e = '/tmp/autotune_ab_%s_%d' % (m, i)
        subprocess.run([primc, 'compile', d + '/model.onnx', '-O2', '--profile', '-o', e] + (tune if i else []),
                       check=True, capture_output=True, env=env)
        exes.append(e)
        out = subprocess.run([primc, 'dump', '--kernels', '-O2', d + '/model.onnx'] + (tune if i else []),
                             capture_output=True, text=True, env=env).stdout
        rows.append(dict(re.findall(r'^kernel (k\d+) = call primc_k_conv.* conv row ([a-z0-9_]+)', out, re.M)))
    best = [{}, {}]
    for r in range(R):
        for i in ((0, 1) if r % 2 == 0 else (1, 0)):
            out = subprocess.run([exes[i], d + '/input.npy', '--bench', '1', '--profile', '-o', '/tmp/autotune_ab_out%d' % i],
                                 capture_output=True, text=True, env=env).stdout
            for k, v in parse(out).items(): best[i][k] = min(v, best[i].get(k, 1e30))
    a, b = sum(best[0].values()), sum(best[1].values()); lr.append(math.log(b / a))
    both = [k for k in rows[0] if k in best[0] and k in best[1]]
    same = [k for k in both if rows[1].get(k) == rows[0][k]]; diff = [k for k in both if rows[1].get(k) != rows[0][k]]
    s = lambda ks, i: sum(best[i][k] for k in ks)
    print('%-16s planner %8.3f ms  tuned %8.3f ms  tuned/planner %.3f | %2d convs on the same row %.3f | %2d on another '
          'row %7.2f -> %7.2f ms %.3f' % (m, a, b, b / a, len(same), s(same, 1) / max(s(same, 0), 1e-9), len(diff),
                                         s(diff, 0), s(diff, 1), s(diff, 1) / max(s(diff, 0), 1e-9)), flush=True)
print('geomean tuned/planner: %.3f over %d models' % (math.exp(sum(lr) / len(lr)), len(lr)))
