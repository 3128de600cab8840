#!/usr/bin/env python3
# bench/ab.py: A/B timing of primc builds against ONNX Runtime, interleaved in one run (noisy shared machine).
# Usage: python3 bench/ab.py [--threads N] RUNS primcA[,primcB...] MODEL_DIR...  (each dir holds model.onnx
# and input.npy); N threads for both (default 1)
import sys, os, re, subprocess, statistics, time, numpy as np, onnxruntime as ort
args=sys.argv[1:]; threads=1
if args[:1]==['--threads']: threads=int(args[1]); args=args[2:]
runs=int(args[0]); primcs=args[1].split(','); dirs=args[2:]
def ortt(d):
    so=ort.SessionOptions(); so.intra_op_num_threads=threads; so.inter_op_num_threads=1
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
            time.sleep(0.5) # ONNX Runtime's pool spins a while after its last run: wait it out, as bench/run.py does
            out=subprocess.run([e,d+'/input.npy','--bench',str(runs)],capture_output=True,text=True,env=dict(os.environ,PRIMC_NUM_THREADS=str(threads))).stdout
            res[i].append(float(re.search(r'median[^0-9]*([0-9.]+)',out).group(1)))
        time.sleep(0.5)
        o.append(ortt(d))
    print("%-16s "%name + "  ".join("primc%d %.3f"%(i,min(v)) for i,v in res.items()) + "  ort %.3f ms"%min(o), flush=True)
