#!/usr/bin/env python3
# tests/flip_grads.py: two 3x3 convs C -> O -> C with a ReLU between, their weights inputs of the model (so a --grad
# step flips them at run time, as a training step does), and the gradients of x, w1 and w2 for cotangent ct in
# float64 numpy (each conv's adjoint, tap by tap), as compare_grads.py reads them (grad.npz: ct0, g0, g1, g2).
# Usage: python3 tests/flip_grads.py OUTDIR C O H W
import sys, numpy as np, onnx
from onnx import helper as h, TensorProto as T, numpy_helper as nh
out = sys.argv[1]
C, O, H, W = int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
rng = np.random.default_rng(7)
w1 = (rng.standard_normal((O, C, 3, 3)) / np.sqrt(9 * C)).astype(np.float32)
w2 = (rng.standard_normal((C, O, 3, 3)) / np.sqrt(9 * O)).astype(np.float32)
x = rng.standard_normal((1, C, H, W)).astype(np.float32)
ct = rng.standard_normal((1, C, H, W)).astype(np.float32)
g = h.make_graph([h.make_node('Conv', ['x', 'w1'], ['a'], name='conv1', pads=[1, 1, 1, 1]),
                  h.make_node('Relu', ['a'], ['r'], name='relu'),
                  h.make_node('Conv', ['r', 'w2'], ['y'], name='conv2', pads=[1, 1, 1, 1])],
                 'flip', [h.make_tensor_value_info('x', T.FLOAT, [1, C, H, W]),
                          h.make_tensor_value_info('w1', T.FLOAT, [O, C, 3, 3]), h.make_tensor_value_info('w2', T.FLOAT, [C, O, 3, 3])],
                 [h.make_tensor_value_info('y', T.FLOAT, [1, C, H, W])])
onnx.save(h.make_model(g, opset_imports=[h.make_opsetid('', 17)]), out + '/model.onnx')

def conv(x, w):  # x [C, H, W] padded by 1, w [O, C, 3, 3]
    xp = np.pad(x, ((0, 0), (1, 1), (1, 1)))
    return sum(np.einsum('oc,chw->ohw', w[:, :, r, s], xp[:, r:r + x.shape[1], s:s + x.shape[2]])
               for r in range(3) for s in range(3))

def conv_grads(x, w, g):  # d/dx and d/dw of sum(g * conv(x, w))
    xp = np.pad(x, ((0, 0), (1, 1), (1, 1)))
    dxp = np.zeros_like(xp)
    dw = np.zeros_like(w)
    for r in range(3):
        for s in range(3):
            dxp[:, r:r + x.shape[1], s:s + x.shape[2]] += np.einsum('oc,ohw->chw', w[:, :, r, s], g)
            dw[:, :, r, s] = np.einsum('ohw,chw->oc', g, xp[:, r:r + x.shape[1], s:s + x.shape[2]])
    return dxp[:, 1:-1, 1:-1], dw

x64, w164, w264, g64 = x[0].astype(np.float64), w1.astype(np.float64), w2.astype(np.float64), ct[0].astype(np.float64)
a = conv(x64, w164)
r = np.maximum(a, 0)
dr, dw2 = conv_grads(r, w264, g64)
da = dr * (a > 0)
dx, dw1 = conv_grads(x64, w164, da)
np.save(out + '/input.npy', x)
np.save(out + '/w1.npy', w1)
np.save(out + '/w2.npy', w2)
np.save(out + '/ct.npy', ct)
np.savez(out + '/grad.npz', ct0=ct, g0=dx[None], g1=dw1, g2=dw2)
