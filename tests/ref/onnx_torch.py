# tests/ref/onnx_torch.py: an ONNX graph evaluated node by node with torch ops (float64 by default), so that
# torch.autograd gives independent gradients of it (tests/ref/gen_grad_refs.py, gen_train_refs.py). It covers
# the ops of the bundled models; any other op is an error.
import numpy as np
import torch
import torch.nn.functional as F
from onnx import helper, numpy_helper

FLOAT = torch.float64


def attrs(node):
    return {a.name: helper.get_attribute_value(a) for a in node.attribute}


def ints(t):
    return [int(v) for v in t.tolist()]


def conv(x, w, b, a):
    nd = x.dim() - 2
    pads = a.get("pads", [0] * 2 * nd)
    if pads[:nd] != pads[nd:]:
        x = F.pad(x, [p for i in reversed(range(nd)) for p in (pads[i], pads[nd + i])])
        pads = [0] * 2 * nd
    fn = [None, F.conv1d, F.conv2d, F.conv3d][nd]
    return fn(x, w, b, a.get("strides", [1] * nd), pads[:nd], a.get("dilations", [1] * nd), a.get("group", 1))


def maxpool(x, a):
    k = a["kernel_shape"]
    nd = len(k)
    pads = a.get("pads", [0] * 2 * nd)
    if pads[:nd] != pads[nd:]:
        x = F.pad(x, [p for i in reversed(range(nd)) for p in (pads[i], pads[nd + i])], value=-float("inf"))
        pads = [0] * 2 * nd
    return F.max_pool2d(x, k, a.get("strides", [1] * nd), pads[:nd], a.get("dilations", [1] * nd),
                        ceil_mode=bool(a.get("ceil_mode", 0)))


def lstm(env_get, node, a):
    """ONNX LSTM, forward direction, gates i o f c, default activations."""
    x, w, r = env_get(0), env_get(1), env_get(2)
    b = env_get(3)
    h0, c0 = env_get(5), env_get(6)
    hs = a["hidden_size"]
    assert a.get("direction", b"forward") in (b"forward", "forward")
    seq, batch = x.shape[0], x.shape[1]
    h = h0[0] if h0 is not None else torch.zeros(batch, hs, dtype=FLOAT)
    c = c0[0] if c0 is not None else torch.zeros(batch, hs, dtype=FLOAT)
    bias = (b[0, :4 * hs] + b[0, 4 * hs:]) if b is not None else 0
    ys = []
    for t in range(seq):
        gates = x[t] @ w[0].T + h @ r[0].T + bias
        i, o, f, g = gates.split(hs, dim=1)
        i, o, f, g = torch.sigmoid(i), torch.sigmoid(o), torch.sigmoid(f), torch.tanh(g)
        c = f * c + i * g
        h = o * torch.tanh(c)
        ys.append(h)
    y = torch.stack(ys)[:, None]
    return [y, h[None], c[None]]


def run_node(node, get, env_get):
    a = attrs(node)
    op = node.op_type
    x = get(0)
    if op == "Identity":
        return [x]
    if op == "Constant":
        return [torch.tensor(numpy_helper.to_array(a["value"]))]
    if op in ("Add", "Sub", "Mul", "Div", "Pow"):
        f = {"Add": torch.add, "Sub": torch.sub, "Mul": torch.mul, "Div": torch.div, "Pow": torch.pow}[op]
        return [f(x, get(1))]
    if op in ("Relu", "Erf", "Sqrt", "Tanh", "Sigmoid"):
        return [{"Relu": torch.relu, "Erf": torch.erf, "Sqrt": torch.sqrt, "Tanh": torch.tanh,
                 "Sigmoid": torch.sigmoid}[op](x)]
    if op == "Gemm":
        aa = x.T if a.get("transA", 0) else x
        bb = get(1).T if a.get("transB", 0) else get(1)
        y = a.get("alpha", 1.0) * (aa @ bb)
        return [y + a.get("beta", 1.0) * get(2) if len(node.input) > 2 and node.input[2] else y]
    if op == "MatMul":
        return [x @ get(1)]
    if op == "Conv":
        return [conv(x, get(1), get(2) if len(node.input) > 2 and node.input[2] else None, a)]
    if op == "MaxPool":
        return [maxpool(x, a)]
    if op == "GlobalAveragePool":
        return [x.mean(dim=tuple(range(2, x.dim())), keepdim=True)]
    if op == "Flatten":
        ax = a.get("axis", 1)
        return [x.reshape(int(np.prod(x.shape[:ax])), -1)]
    if op == "ReduceMean":
        axes = a.get("axes") if "axes" in a else ints(get(1))
        return [x.mean(dim=tuple(axes), keepdim=bool(a.get("keepdims", 1)))]
    if op == "Reshape":
        shape = ints(get(1))
        shape = [x.shape[i] if s == 0 else s for i, s in enumerate(shape)]
        return [x.reshape(shape)]
    if op == "Transpose":
        return [x.permute(a["perm"])]
    if op == "Softmax":
        return [torch.softmax(x, dim=a.get("axis", -1))]
    if op == "Split":
        sizes = a.get("split") if "split" in a else ints(get(1))
        return list(torch.split(x, sizes, dim=a.get("axis", 0)))
    if op == "Shape":
        return [torch.tensor(list(x.shape), dtype=torch.int64)]
    if op == "Gather":
        ax = a.get("axis", 0)
        idx = get(1) % x.shape[ax]
        return [torch.index_select(x, a.get("axis", 0), idx.reshape(-1)).reshape(
            list(x.shape[:a.get("axis", 0)]) + list(idx.shape) + list(x.shape[a.get("axis", 0) + 1:]))]
    if op == "Unsqueeze":
        axes = a.get("axes") if "axes" in a else ints(get(1))
        for ax in sorted(axes):
            x = x.unsqueeze(ax)
        return [x]
    if op == "Squeeze":
        axes = a.get("axes") if "axes" in a else ints(get(1))
        for ax in sorted(axes, reverse=True):
            x = x.squeeze(ax)
        return [x]
    if op == "Concat":
        return [torch.cat([get(i) for i in range(len(node.input))], dim=a["axis"])]
    if op == "Expand":
        shape = ints(get(1))
        return [x * torch.ones(shape, dtype=x.dtype)]
    if op == "Slice":
        starts, ends = ints(get(1)), ints(get(2))
        axes = ints(get(3)) if len(node.input) > 3 and node.input[3] else list(range(len(starts)))
        steps = ints(get(4)) if len(node.input) > 4 and node.input[4] else [1] * len(starts)
        idx = [slice(None)] * x.dim()
        for s, e, ax, st in zip(starts, ends, axes, steps):
            idx[ax] = slice(max(s, -x.shape[ax]), min(e, x.shape[ax]), st)
        return [x[tuple(idx)]]
    if op == "Resize":
        assert a.get("mode", b"nearest") in (b"nearest", "nearest")
        scales = get(2).tolist()
        return [F.interpolate(x, scale_factor=scales[2:], mode="nearest")]
    if op == "LSTM":
        return lstm(env_get, node, a)
    raise SystemExit(f"gen_grad_refs: no torch rule for {op}")


def load_params(model, requires_grad=True):
    """the float initializers as float64 leaf tensors (in file order), and every initializer by name"""
    env, params = {}, []
    for init in model.graph.initializer:
        t = torch.tensor(numpy_helper.to_array(init))
        if t.is_floating_point():
            t = t.to(FLOAT).requires_grad_(requires_grad)
            params.append((init.name, t))
        env[init.name] = t
    return env, params


def evaluate(model, env):
    """runs the graph on env (inputs and initializers by name); returns the graph outputs"""
    env = dict(env)
    for node in model.graph.node:
        def get(i, node=node):
            if i >= len(node.input) or not node.input[i]:
                return None
            v = env[node.input[i]]
            return v.to(FLOAT) if v.is_floating_point() else v
        outs = run_node(node, get, get)
        for o, v in zip(node.output, outs):
            if o:
                env[o] = v
    return [env[o.name] for o in model.graph.output]
