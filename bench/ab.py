#!/usr/bin/env python3
# bench/ab.py: A/B timing of primc builds against ONNX Runtime on 1 thread, interleaved in one run (noisy shared machine).
# Usage: python3 bench/ab.py RUNS primcA[,primcB...] MODEL_DIR...  (each dir holds model.onnx and input.npy)
import sys, os, re, subprocess, statistics, time, numpy as np, onnxruntime as ort
runs=int(sys.argv[1]); primcs=sys.argv[2].split(','); dirs=sys.argv[3:]
def ortt(d):
    so=ort.SessionOptions(); so.intra_op_num_threads=1; so.inter_op_num_threads=1
    s=ort.InferenceSession(d+'/model.onnx',so,providers=['CPUExecutionProvider'])
    x=np.load(d+'/input.npy'); b=s.io_binding(); b.bind_cpu_input(s.get_inputs()[0].name,x)
    for o in s.get_outputs(): b.bind_output(o.name,'cpu')
    for _ in range(3): s.run_with_iobinding(b)
    ts=[]
    for _ in range(runs):
        t=time.perf_counter(); s.run_with_iobinding(b); ts.append((time.perf_counter()-t)*1e3)
    return statistics.median(ts)
for d in dirs:
    name=os.path.basename(d.rstrip('/')); exes=[]
    for i,p in enumerate(primcs):
        e='/tmp/bench_%s_%d'%(name,i); subprocess.run([p,'compile',d+'/model.onnx','-O2','-o',e],check=True); exes.append(e)
    res={i:[] for i in range(len(exes))}; o=[]
    for r in range(3):
        for i,e in enumerate(exes):
            out=subprocess.run([e,d+'/input.npy','--bench',str(runs)],capture_output=True,text=True,env=dict(os.environ,PRIMC_NUM_THREADS='1')).stdout
            res[i].append(float(re.search(r'median[^0-9]*([0-9.]+)',out).group(1)))
        o.append(ortt(d))
    print("%-16s "%name + "  ".join("primc%d %.3f"%(i,min(v)) for i,v in res.items()) + "  ort %.3f ms"%min(o), flush=True)
