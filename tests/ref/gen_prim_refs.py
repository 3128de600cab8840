#!/usr/bin/env python3
"""tests/ref/gen_prim_refs.py: numpy reference inputs/outputs for every prim, for tests/unit/test_interp.c.

Writes tests/data/prims/<case>/in<k>.npy, out<k>.npy and tests/data/prims/cases.txt, one line per case:
    <case> <prim> nin=<k> nout=<m> atol=<a> rtol=<r> [bf16=in0,out0] [attr=kind:value ...]
attr kinds: i (int), is (comma-separated ints, may be empty), f (float), s (string), d (dtype name).
bf16 tensors are stored as float32 holding bf16-exact values (numpy has no bfloat16).
Fixed seeds: rerunning writes identical files. Run: python3 tests/ref/gen_prim_refs.py
"""
import math
import os
import shutil
import sys

import numpy as np

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data", "prims")
rng = np.random.default_rng(20261122)
shutil.rmtree(ROOT, ignore_errors=True)
lines = []


class D(str):
    """a dtype attribute"""


def attr_text(k, v):
    if isinstance(v, D):
        return f"{k}=d:{v}"
    if isinstance(v, str):
        return f"{k}=s:{v}"
    if isinstance(v, bool) or isinstance(v, (int, np.integer)):
        return f"{k}=i:{int(v)}"
    if isinstance(v, float):
        return f"{k}=f:{v!r}"
    return f"{k}=is:" + ",".join(str(int(x)) for x in v)


def case(name, prim, ins, outs, attrs=None, atol=0.0, rtol=0.0, bf16=()):
    d = os.path.join(ROOT, name)
    os.makedirs(d, exist_ok=True)
    for i, a in enumerate(ins):
        np.save(os.path.join(d, f"in{i}.npy"), np.array(a, order="C"))  # keeps 0-d arrays 0-d
    for i, a in enumerate(outs):
        np.save(os.path.join(d, f"out{i}.npy"), np.array(a, order="C"))
    parts = [name, prim, f"nin={len(ins)}", f"nout={len(outs)}", f"atol={atol!r}", f"rtol={rtol!r}"]
    if bf16:
        parts.append("bf16=" + ",".join(bf16))
    parts += [attr_text(k, v) for k, v in (attrs or {}).items()]
    lines.append(" ".join(parts))


def bf16_round(x):
    """float32 -> nearest-even bfloat16 value, kept as float32"""
    u = np.asarray(x, np.float32).view(np.uint32).astype(np.uint64)
    u = (u + 0x7FFF + ((u >> 16) & 1)) & 0xFFFF0000
    return u.astype(np.uint32).view(np.float32)


def randf(shape, lo=-2.0, hi=2.0, dt=np.float32):
    return rng.uniform(lo, hi, shape).astype(dt)


def randi(shape, lo=-20, hi=20, dt=np.int32):
    return rng.integers(lo, hi, shape).astype(dt)


F32 = dict(atol=1e-6, rtol=1e-5)
F16 = dict(atol=1e-3, rtol=2e-3)
BF16 = dict(atol=1e-3, rtol=8e-3)
F64 = dict(atol=1e-12, rtol=1e-12)

# ---------------------------------------------------------------- elementwise unary

erf = np.vectorize(math.erf)
UNARY_F = {
    "neg": (np.negative, -3, 3), "abs": (np.abs, -3, 3), "exp": (np.exp, -3, 3), "log": (np.log, 0.05, 4),
    "log1p": (np.log1p, -0.9, 3), "expm1": (np.expm1, -2, 2), "sqrt": (np.sqrt, 0, 4),
    "rsqrt": (lambda x: 1 / np.sqrt(x), 0.1, 4), "reciprocal": (lambda x: 1 / x, 0.2, 4),
    "sin": (np.sin, -4, 4), "cos": (np.cos, -4, 4), "tan": (np.tan, -1.2, 1.2), "tanh": (np.tanh, -3, 3),
    "erf": (erf, -2.5, 2.5), "sigmoid": (lambda x: 1 / (1 + np.exp(-x)), -6, 6), "floor": (np.floor, -4, 4),
    "ceil": (np.ceil, -4, 4), "round": (np.round, -4, 4), "sign": (np.sign, -2, 2),
}
for prim, (fn, lo, hi) in UNARY_F.items():
    x = randf((3, 5), lo, hi)
    if prim == "round":
        x[0, :] = [-2.5, -1.5, -0.5, 0.5, 2.5]
    if prim == "sign":
        x[0, :2] = 0
    case(f"{prim}_f32", prim, [x], [fn(x.astype(np.float64)).astype(np.float32)], **F32)
for prim in ["exp", "sin", "sqrt", "erf"]:
    fn, lo, hi = UNARY_F[prim]
    x = randf((4, 3), lo, hi, np.float64)
    case(f"{prim}_f64", prim, [x], [fn(x)], **F64)
for prim in ["exp", "tanh", "neg", "sigmoid"]:
    fn, lo, hi = UNARY_F[prim]
    x = randf((2, 6), lo, hi, np.float16)
    case(f"{prim}_f16", prim, [x], [fn(x.astype(np.float64)).astype(np.float16)], **F16)
    xb = bf16_round(randf((2, 6), lo, hi))
    case(f"{prim}_bf16", prim, [xb], [bf16_round(fn(xb.astype(np.float64)).astype(np.float32))], bf16=("in0", "out0"), **BF16)
xi = randi((3, 4), -50, 50)
case("neg_i32", "neg", [xi], [-xi])
case("sign_i32", "sign", [xi], [np.sign(xi)])
x8 = np.array([-128, -5, 0, 7, 127, -1], np.int8)
case("abs_i8", "abs", [x8], [np.abs(x8)])  # abs(-128) wraps to -128
case("neg_u8", "neg", [np.array([0, 1, 200, 255], np.uint8)], [np.array([0, 255, 56, 1], np.uint8)])
xb = rng.integers(0, 2, (2, 5)).astype(bool)
case("not_bool", "not", [xb], [np.logical_not(xb)])
case("not_i32", "not", [xi], [np.invert(xi)])
xs = np.array([0.0, np.nan, np.inf, -np.inf, 1.5, -0.0], np.float32)
case("isnan_f32", "isnan", [xs], [np.isnan(xs)])
case("isinf_f32", "isinf", [xs], [np.isinf(xs)])
case("isnan_f16", "isnan", [xs.astype(np.float16)], [np.isnan(xs)])

# ---------------------------------------------------------------- elementwise binary


def trunc_div(a, b):
    """C division: the quotient truncated toward zero, computed on Python ints"""
    q = [abs(int(x)) // abs(int(y)) * (1 if (x < 0) == (y < 0) else -1) for x, y in zip(a.ravel(), b.ravel())]
    return np.array(q, dtype=np.int64).reshape(a.shape).astype(a.dtype)


BIN_F = {
    "add": (np.add, -3, 3), "sub": (np.subtract, -3, 3), "mul": (np.multiply, -3, 3),
    "div": (np.divide, 0.5, 3), "pow": (np.power, 0.1, 3), "rem": (np.fmod, -5, 5),
    "max": (np.maximum, -3, 3), "min": (np.minimum, -3, 3), "atan2": (np.arctan2, -3, 3),
}
for prim, (fn, lo, hi) in BIN_F.items():
    a, b = randf((3, 4), lo, hi), randf((3, 4), lo, hi)
    if prim == "div":
        b = -b * (rng.integers(0, 2, b.shape) * 2 - 1).astype(np.float32)
    if prim == "rem":
        b = randf((3, 4), 0.5, 2) * np.sign(randf((3, 4)))
    if prim in ("max", "min"):
        a[0, 0], b[1, 1] = np.nan, np.nan  # NaN propagates
    case(f"{prim}_f32", prim, [a, b], [fn(a.astype(np.float64), b.astype(np.float64)).astype(np.float32)], **F32)
for prim in ["add", "mul", "div"]:
    fn, lo, hi = BIN_F[prim]
    a, b = randf((5,), lo, hi, np.float64), randf((5,), lo, hi, np.float64)
    case(f"{prim}_f64", prim, [a, b], [fn(a, b)], **F64)
    a16, b16 = randf((6,), lo, hi, np.float16), randf((6,), lo, hi, np.float16)
    case(f"{prim}_f16", prim, [a16, b16], [fn(a16.astype(np.float32), b16.astype(np.float32)).astype(np.float16)], **F16)
    ab, bb = bf16_round(randf((6,), lo, hi)), bf16_round(randf((6,), lo, hi))
    case(f"{prim}_bf16", prim, [ab, bb], [bf16_round(fn(ab, bb))], bf16=("in0", "in1", "out0"), **BF16)
case("add_f32_scalar", "add", [np.float32(1.25), np.float32(-3.5)], [np.float32(-2.25)])

a, b = randi((4, 5), -40, 40), randi((4, 5), 1, 9) * np.where(rng.integers(0, 2, (4, 5)) > 0, 1, -1).astype(np.int32)
case("add_i32", "add", [a, b], [a + b])
case("sub_i32", "sub", [a, b], [a - b])
case("mul_i32", "mul", [a, b], [a * b])
case("div_i32", "div", [a, b], [trunc_div(a, b)])
case("rem_i32", "rem", [a, b], [np.fmod(a, b)])
case("max_i32", "max", [a, b], [np.maximum(a, b)])
case("min_i32", "min", [a, b], [np.minimum(a, b)])
e = randi((4, 5), 0, 5)
case("pow_i32", "pow", [a, e], [np.power(a, e)])
a64 = np.array([2**62, -(2**62), 12345678901, -7], np.int64)
b64 = np.array([4, 3, -98765, -7], np.int64)
with np.errstate(over="ignore"):
    case("mul_i64", "mul", [a64, b64], [a64 * b64])  # wraps
    case("add_u8", "add", [np.array([200, 100, 255], np.uint8), np.array([100, 100, 1], np.uint8)],
         [np.array([44, 200, 0], np.uint8)])
case("div_i64", "div", [a64, b64], [trunc_div(a64, b64)])
for prim, fn in [("eq", np.equal), ("ne", np.not_equal), ("lt", np.less), ("le", np.less_equal),
                 ("gt", np.greater), ("ge", np.greater_equal)]:
    x, y = randi((3, 4), -3, 3).astype(np.float32), randi((3, 4), -3, 3).astype(np.float32)
    x[0, 0] = np.nan
    case(f"{prim}_f32", prim, [x, y], [fn(x, y)])
    xi, yi = randi((3, 4), -3, 3), randi((3, 4), -3, 3)
    case(f"{prim}_i32", prim, [xi, yi], [fn(xi, yi)])
p, q = rng.integers(0, 2, (2, 4)).astype(bool), rng.integers(0, 2, (2, 4)).astype(bool)
case("eq_bool", "eq", [p, q], [p == q])
case("ne_bool", "ne", [p, q], [p != q])
for prim, lf, bf in [("and", np.logical_and, np.bitwise_and), ("or", np.logical_or, np.bitwise_or),
                     ("xor", np.logical_xor, np.bitwise_xor)]:
    case(f"{prim}_bool", prim, [p, q], [lf(p, q)])
    xi, yi = randi((3, 4), -100, 100), randi((3, 4), -100, 100)
    case(f"{prim}_i32", prim, [xi, yi], [bf(xi, yi)])
    case(f"bitwise_{prim}_i32", f"bitwise_{prim}", [xi, yi], [bf(xi, yi)])
    xu, yu = randi((5,), 0, 256, np.uint8), randi((5,), 0, 256, np.uint8)
    case(f"bitwise_{prim}_u8", f"bitwise_{prim}", [xu, yu], [bf(xu, yu)])
xi, s = randi((3, 4), -1000, 1000), randi((3, 4), 0, 31)
case("shift_left_i32", "shift_left", [xi, s], [np.left_shift(xi, s)])
case("shift_right_i32", "shift_right", [xi, s], [np.right_shift(xi, s)])  # arithmetic
xu, su = randi((6,), 0, 256, np.uint8), randi((6,), 0, 8, np.uint8)
case("shift_left_u8", "shift_left", [xu, su], [np.left_shift(xu, su)])
case("shift_right_u8", "shift_right", [xu, su], [np.right_shift(xu, su)])  # logical

# ---------------------------------------------------------------- ternary, types

cond = rng.integers(0, 2, (3, 4)).astype(bool)
a, b = randf((3, 4)), randf((3, 4))
case("where_f32", "where", [cond, a, b], [np.where(cond, a, b)])
ai, bi = randi((3, 4), dt=np.int64), randi((3, 4), dt=np.int64)
case("where_i64", "where", [cond, ai, bi], [np.where(cond, ai, bi)])
x, lo, hi = randf((3, 4), -3, 3), randf((3, 4), -2, 0), randf((3, 4), 0, 2)
case("clamp_f32", "clamp", [x, lo, hi], [np.minimum(np.maximum(x, lo), hi)])
xi, loi, hii = randi((3, 4), -30, 30), randi((3, 4), -10, 0), randi((3, 4), 0, 10)
case("clamp_i32", "clamp", [xi, loi, hii], [np.minimum(np.maximum(xi, loi), hii)])

x = randf((3, 4), -100, 100)
case("convert_f32_i32", "convert_element_type", [x], [np.trunc(x).astype(np.int32)], {"dtype": D("i32")})
case("convert_i32_f32", "convert_element_type", [xi], [xi.astype(np.float32)], {"dtype": D("f32")})
case("convert_f32_f16", "convert_element_type", [x], [x.astype(np.float16)], {"dtype": D("f16")})
x64 = randf((3, 4), -100, 100, np.float64)
case("convert_f64_f32", "convert_element_type", [x64], [x64.astype(np.float32)], {"dtype": D("f32")})
case("convert_f64_f16", "convert_element_type", [x64], [x64.astype(np.float16)], {"dtype": D("f16")})
xz = x.copy()
xz[0, :2] = 0
case("convert_f32_bool", "convert_element_type", [xz], [xz != 0], {"dtype": D("bool")})
case("convert_bool_f32", "convert_element_type", [cond], [cond.astype(np.float32)], {"dtype": D("f32")})
case("convert_i32_i8", "convert_element_type", [xi * 9], [(xi * 9).astype(np.int8)], {"dtype": D("i8")})  # wraps
case("convert_u8_i32", "convert_element_type", [xu], [xu.astype(np.int32)], {"dtype": D("i32")})
case("convert_f32_bf16", "convert_element_type", [x], [bf16_round(x)], {"dtype": D("bf16")}, bf16=("out0",))
case("convert_bf16_f32", "convert_element_type", [bf16_round(x)], [bf16_round(x)], {"dtype": D("f32")}, bf16=("in0",))

xb32 = randf((3, 2))
case("bitcast_f32_i32", "bitcast", [xb32], [xb32.view(np.int32)], {"dtype": D("i32")})
case("bitcast_i32_f64", "bitcast", [xb32.view(np.int32)], [xb32.view(np.float64).reshape(3)], {"dtype": D("f64")})
case("bitcast_f32_u8", "bitcast", [xb32], [xb32.view(np.uint8).reshape(3, 2, 4)], {"dtype": D("u8")})

# ---------------------------------------------------------------- movement

x = randf((3,))
case("broadcast_in_dim_f32", "broadcast_in_dim", [x], [np.broadcast_to(x, (2, 3))], {"shape": [2, 3], "dims": [1]})
x = randi((3, 1, 2))
case("broadcast_in_dim_i32", "broadcast_in_dim", [x], [np.broadcast_to(x.reshape(3, 1, 1, 2), (3, 4, 5, 2))],
     {"shape": [3, 4, 5, 2], "dims": [0, 1, 3]})
case("broadcast_in_dim_scalar", "broadcast_in_dim", [np.float32(2.5)], [np.full((2, 2), 2.5, np.float32)],
     {"shape": [2, 2], "dims": []})
x = randf((2, 3, 4))
case("reshape_f32", "reshape", [x], [x.reshape(6, 4)], {"shape": [6, 4]})
case("transpose_f32", "transpose", [x], [x.transpose(1, 0, 2)], {"perm": [1, 0, 2]})
case("transpose_i8", "transpose", [x.astype(np.int8)], [x.astype(np.int8).transpose(2, 0, 1)], {"perm": [2, 0, 1]})
x = randf((5, 6))
case("slice_f32", "slice", [x], [x[1:5:2, 0:6:3]], {"start": [1, 0], "limit": [5, 6], "stride": [2, 3]})
xi = randi((4, 7), dt=np.int64)
case("slice_i64", "slice", [xi], [xi[1:3, 2:7]], {"start": [1, 2], "limit": [3, 7], "stride": [1, 1]})


def ref_pad(x, low, high, interior, value):
    """pad by building the interior-dilated array, then padding / cropping each side"""
    out = x
    for ax, it in enumerate(interior):
        n = out.shape[ax]
        if it and n > 0:
            shape = list(out.shape)
            shape[ax] = n + (n - 1) * it
            d = np.full(shape, value, x.dtype)
            sl = [slice(None)] * out.ndim
            sl[ax] = slice(0, None, it + 1)
            d[tuple(sl)] = out
            out = d
    for ax, (l, h) in enumerate(zip(low, high)):
        if l < 0:
            out = np.take(out, range(-l, out.shape[ax]), axis=ax)
        if h < 0:
            out = np.take(out, range(0, out.shape[ax] + h), axis=ax)
        widths = [(0, 0)] * out.ndim
        widths[ax] = (max(l, 0), max(h, 0))
        out = np.pad(out, widths, constant_values=value)
    return out


x = randf((3, 4))
case("pad_f32", "pad", [x], [ref_pad(x, [1, -1], [2, 0], [1, 0], 0.5)],
     {"low": [1, -1], "high": [2, 0], "interior": [1, 0], "value": 0.5})
xi = randi((3, 3))
case("pad_i32", "pad", [xi], [ref_pad(xi, [0, 2], [-1, 1], [0, 2], 7)],
     {"low": [0, 2], "high": [-1, 1], "interior": [0, 2], "value": 7.0})
a, b, c = randf((2, 1, 3)), randf((2, 4, 3)), randf((2, 2, 3))
case("concatenate_f32", "concatenate", [a, b, c], [np.concatenate([a, b, c], 1)], {"axis": 1})
ai, bi = randi((2, 3)), randi((1, 3))
case("concatenate_i32", "concatenate", [ai, bi], [np.concatenate([ai, bi], 0)], {"axis": 0})
x = randf((2, 3, 4))
case("rev_f32", "rev", [x], [x[::-1, :, ::-1]], {"dims": [0, 2]})
case("iota_i32", "iota", [], [np.broadcast_to(np.arange(3, dtype=np.int32), (2, 3))],
     {"dtype": D("i32"), "shape": [2, 3], "axis": 1})
case("iota_f32", "iota", [], [np.broadcast_to(np.arange(4, dtype=np.float32).reshape(4, 1), (4, 2))],
     {"dtype": D("f32"), "shape": [4, 2], "axis": 0})

x = randf((3, 5))
idx = rng.integers(0, 5, (2, 3)).astype(np.int64)
case("gather_f32", "gather", [x, idx], [np.take_along_axis(x[:2], idx, 1)], {"axis": 1})
xi = randi((4, 3), dt=np.int32)
idx0 = rng.integers(0, 4, (6, 3)).astype(np.int32)
case("gather_i32_axis0", "gather", [xi, idx0], [np.take_along_axis(xi, idx0, 0)], {"axis": 0})


def ref_scatter(x, idx, upd, axis, reduce):
    """torch.scatter / scatter_reduce(include_self=True) by explicit loops in row-major order"""
    out = x.copy()
    comb = {"none": lambda o, u: u, "add": lambda o, u: o + u, "mul": lambda o, u: o * u,
            "max": max, "min": min}[reduce]
    for pos in np.ndindex(*idx.shape):
        t = list(pos)
        t[axis] = idx[pos]
        out[tuple(t)] = comb(out[tuple(t)], upd[pos])
    return out


x = randf((3, 5))
idx = np.array([[0, 1, 2], [4, 3, 2]], np.int64)  # one target per position: "none" is unambiguous
upd = randf((2, 3))
case("scatter_f32", "scatter", [x, idx, upd], [ref_scatter(x, idx, upd, 1, "none")], {"axis": 1, "reduce": "none"})
idx = rng.integers(0, 5, (3, 4)).astype(np.int64)  # duplicates accumulate
upd = randf((3, 4))
case("scatter_add_f32", "scatter", [x, idx, upd], [ref_scatter(x, idx, upd, 1, "add")], {"axis": 1, "reduce": "add"}, **F32)
xi, ui = randi((4, 3)), randi((5, 3), -4, 4)
idx = rng.integers(0, 4, (5, 3)).astype(np.int32)
for red in ["add", "mul", "max", "min"]:
    case(f"scatter_{red}_i32", "scatter", [xi, idx, ui], [ref_scatter(xi, idx, ui, 0, red)], {"axis": 0, "reduce": red})

# ---------------------------------------------------------------- reductions

x = randf((3, 4, 5))
case("reduce_sum_f32", "reduce_sum", [x], [x.astype(np.float64).sum((0, 2)).astype(np.float32)], {"axes": [0, 2]}, **F32)
case("reduce_sum_all_f32", "reduce_sum", [x], [np.float32(x.astype(np.float64).sum())], {"axes": [0, 1, 2]}, **F32)
case("reduce_prod_f32", "reduce_prod", [x], [x.astype(np.float64).prod(1).astype(np.float32)], {"axes": [1]}, **F32)
xn = x.copy()
xn[1, 2, 3] = np.nan
case("reduce_max_f32", "reduce_max", [xn], [xn.max(2)], {"axes": [2]})
case("reduce_min_f32", "reduce_min", [x], [x.min(0)], {"axes": [0]})
xi = randi((3, 4, 5), -100, 100)
case("reduce_sum_i32", "reduce_sum", [xi], [xi.sum(1).astype(np.int32)], {"axes": [1]})
case("reduce_prod_i64", "reduce_prod", [xi.astype(np.int64)], [xi.astype(np.int64).prod(2)], {"axes": [2]})
case("reduce_max_i32", "reduce_max", [xi], [xi.max((0, 1))], {"axes": [0, 1]})
case("reduce_min_i8", "reduce_min", [xi.astype(np.int8)], [xi.astype(np.int8).min(2)], {"axes": [2]})
x16 = randf((4, 8), -2, 2, np.float16)
case("reduce_sum_f16", "reduce_sum", [x16], [x16.astype(np.float64).sum(1).astype(np.float16)], {"axes": [1]}, **F16)

xt = randi((4, 6), 0, 3).astype(np.float32)  # small ints: many ties


def last_arg(fn, x, axis):
    return (x.shape[axis] - 1 - fn(np.flip(x, axis), axis)).astype(np.int64)


case("argmax_f32", "argmax", [xt], [np.argmax(xt, 1).astype(np.int64)], {"axis": 1, "last": 0})
case("argmax_last_f32", "argmax", [xt], [last_arg(np.argmax, xt, 1)], {"axis": 1, "last": 1})
xtn = xt.copy()
xtn[2, 3] = np.nan
case("argmin_nan_f32", "argmin", [xtn], [np.argmin(xtn, 1).astype(np.int64)], {"axis": 1, "last": 0})
xi = randi((5, 3), 0, 4)
case("argmin_i32", "argmin", [xi], [np.argmin(xi, 0).astype(np.int64)], {"axis": 0, "last": 0})
case("argmin_last_i32", "argmin", [xi], [last_arg(np.argmin, xi, 0)], {"axis": 0, "last": 1})

x = randf((3, 5))


def ref_cumsum(x, axis, exclusive, reverse):
    y = np.flip(x, axis) if reverse else x
    c = np.cumsum(y.astype(np.float64) if x.dtype.kind == "f" else y, axis)
    if exclusive:
        c = np.concatenate([np.zeros_like(np.take(c, [0], axis)), np.take(c, range(c.shape[axis] - 1), axis)], axis)
    c = np.flip(c, axis) if reverse else c
    return c.astype(x.dtype)


for ex in (0, 1):
    for rv in (0, 1):
        case(f"cumsum_f32_e{ex}r{rv}", "cumsum", [x], [ref_cumsum(x, 1, ex, rv)],
             {"axis": 1, "exclusive": ex, "reverse": rv}, **F32)
xi = randi((4, 3), -9, 9)
case("cumsum_i32", "cumsum", [xi], [ref_cumsum(xi, 0, 1, 1)], {"axis": 0, "exclusive": 1, "reverse": 1})

# ---------------------------------------------------------------- contractions


def dg_attrs(lc, rc, lb, rb):
    return {"lhs_contract": lc, "rhs_contract": rc, "lhs_batch": lb, "rhs_batch": rb}


a, b = randf((3, 4)), randf((4, 5))
case("dot_general_mm_f32", "dot_general", [a, b], [(a.astype(np.float64) @ b).astype(np.float32)],
     dg_attrs([1], [0], [], []), **F32)
a, b = randf((2, 3, 4)), randf((2, 4, 5))
case("dot_general_bmm_f32", "dot_general", [a, b], [np.einsum("bij,bjk->bik", a.astype(np.float64), b).astype(np.float32)],
     dg_attrs([2], [1], [0], [0]), **F32)
a, b = randf((4, 2, 3)), randf((5, 4, 2))
case("dot_general_perm_f32", "dot_general", [a, b], [np.einsum("kbi,jkb->bij", a.astype(np.float64), b).astype(np.float32)],
     dg_attrs([0], [1], [1], [2]), **F32)
a, b = randf((2, 3, 4)), randf((4, 3))
case("dot_general_two_contract_f32", "dot_general", [a, b], [np.einsum("xij,ji->x", a.astype(np.float64), b).astype(np.float32)],
     dg_attrs([1, 2], [1, 0], [], []), **F32)
ai, bi = randi((3, 4)), randi((4, 2))
case("dot_general_i32", "dot_general", [ai, bi], [ai @ bi], dg_attrs([1], [0], [], []))
a16, b16 = randf((3, 8), -1, 1, np.float16), randf((8, 2), -1, 1, np.float16)
case("dot_general_f16", "dot_general", [a16, b16], [(a16.astype(np.float64) @ b16).astype(np.float16)],
     dg_attrs([1], [0], [], []), **F16)


def ref_conv(x, w, stride, lo, hi, dil, ldil, groups):
    """dilate the input with zeros, pad (negative crops), dilate the kernel, then correlate with stride"""
    ns = x.ndim - 2
    for d in range(ns):
        n = x.shape[2 + d]
        shape = list(x.shape)
        shape[2 + d] = (n - 1) * ldil[d] + 1 if n else 0
        z = np.zeros(shape, np.float64)
        sl = [slice(None)] * x.ndim
        sl[2 + d] = slice(0, None, ldil[d])
        z[tuple(sl)] = x
        x = z
    x = ref_pad(x, [0, 0] + list(lo), [0, 0] + list(hi), [0] * x.ndim, 0.0)
    k = w.astype(np.float64)
    for d in range(ns):
        n = k.shape[2 + d]
        shape = list(k.shape)
        shape[2 + d] = (n - 1) * dil[d] + 1
        z = np.zeros(shape)
        sl = [slice(None)] * k.ndim
        sl[2 + d] = slice(0, None, dil[d])
        z[tuple(sl)] = k
        k = z
    N, C = x.shape[:2]
    O = w.shape[0]
    osz = [(x.shape[2 + d] - k.shape[2 + d]) // stride[d] + 1 for d in range(ns)]
    out = np.zeros([N, O] + osz)
    cg, og = C // groups, O // groups
    for o in range(O):
        g = o // og
        for pos in np.ndindex(*osz):
            sl = tuple(slice(pos[d] * stride[d], pos[d] * stride[d] + k.shape[2 + d]) for d in range(ns))
            patch = x[(slice(None), slice(g * cg, (g + 1) * cg)) + sl]
            out[(slice(None), o) + pos] = (patch * k[o]).reshape(N, -1).sum(1)
    return out


def conv_case(name, x, w, stride, lo, hi, dil, ldil, groups, tol):
    ref = ref_conv(x.astype(np.float64), w, stride, lo, hi, dil, ldil, groups).astype(x.dtype)
    case(name, "conv", [x, w], [ref], {"stride": stride, "pad_lo": lo, "pad_hi": hi, "dilation": dil,
                                       "lhs_dilation": ldil, "groups": groups}, **tol)


conv_case("conv2d_f32", randf((2, 4, 6, 5)), randf((6, 2, 3, 2)), [2, 1], [1, 0], [0, 2], [1, 2], [1, 1], 2, F32)
conv_case("conv1d_lhs_dilation_f32", randf((1, 2, 5)), randf((3, 2, 3)), [1], [2], [-1], [1], [2], 1, F32)
conv_case("conv2d_depthwise_f32", randf((1, 3, 4, 4)), randf((3, 1, 3, 3)), [1, 1], [1, 1], [1, 1], [1, 1], [1, 1], 3, F32)
conv_case("conv3d_f32", randf((1, 2, 3, 4, 3)), randf((2, 2, 2, 2, 2)), [1, 2, 1], [0, 1, 0], [0, 0, 1], [1, 1, 2], [1, 1, 1], 1, F32)
conv_case("conv2d_i32", randi((1, 2, 4, 4), -5, 5), randi((2, 2, 2, 2), -3, 3), [1, 1], [0, 0], [0, 0], [1, 1], [1, 1], 1, {})

# ---------------------------------------------------------------- fft

xc = (randf((2, 8)) + 1j * randf((2, 8))).astype(np.complex64)
FFT = dict(atol=1e-5, rtol=1e-5)
case("fft_c64", "fft", [xc], [np.fft.fft(xc.astype(np.complex128), 8).astype(np.complex64)], {"type": "fft", "length": 8}, **FFT)
case("fft_pad_c64", "fft", [xc], [np.fft.fft(xc.astype(np.complex128), 10).astype(np.complex64)], {"type": "fft", "length": 10}, **FFT)
case("ifft_c64", "fft", [xc], [np.fft.ifft(xc.astype(np.complex128), 8).astype(np.complex64)], {"type": "ifft", "length": 8}, **FFT)
xr = randf((3, 8))
case("rfft_f32", "fft", [xr], [np.fft.rfft(xr.astype(np.float64), 8).astype(np.complex64)], {"type": "rfft", "length": 8}, **FFT)
case("rfft_cut_f32", "fft", [xr], [np.fft.rfft(xr.astype(np.float64), 6).astype(np.complex64)], {"type": "rfft", "length": 6}, **FFT)
xh = (randf((2, 5)) + 1j * randf((2, 5))).astype(np.complex64)
case("irfft_c64", "fft", [xh], [np.fft.irfft(xh.astype(np.complex128), 8).astype(np.float32)], {"type": "irfft", "length": 8}, **FFT)
case("irfft_odd_c64", "fft", [xh], [np.fft.irfft(xh.astype(np.complex128), 7).astype(np.float32)], {"type": "irfft", "length": 7}, **FFT)

# ---------------------------------------------------------------- sort, topk

xt = randi((3, 7), 0, 4).astype(np.float32)  # ties check stability
xt[1, 2] = np.nan
order = np.argsort(xt, 1, kind="stable")
case("sort_f32", "sort", [xt], [np.take_along_axis(xt, order, 1), order.astype(np.int64)], {"axis": 1, "descending": 0})


def stable_desc(x, axis):
    """descending, ties in index order, NaN last"""
    key = np.where(np.isnan(x), np.inf, -x) if x.dtype.kind == "f" else -x.astype(np.int64)
    return np.argsort(key, axis, kind="stable")


order = stable_desc(xt, 1)
case("sort_desc_f32", "sort", [xt], [np.take_along_axis(xt, order, 1), order.astype(np.int64)], {"axis": 1, "descending": 1})
xi = randi((6, 3), -5, 5)
order = np.argsort(xi, 0, kind="stable")
case("sort_i32", "sort", [xi], [np.take_along_axis(xi, order, 0), order.astype(np.int64)], {"axis": 0, "descending": 0})
xt = randi((2, 8), 0, 5).astype(np.float32)
order = stable_desc(xt, 1)[:, :3]
case("topk_f32", "topk", [xt], [np.take_along_axis(xt, order, 1), order.astype(np.int64)], {"k": 3, "axis": 1, "largest": 1})
order = np.argsort(xt, 1, kind="stable")[:, :2]
case("topk_smallest_f32", "topk", [xt], [np.take_along_axis(xt, order, 1), order.astype(np.int64)], {"k": 2, "axis": 1, "largest": 0})
order = stable_desc(xi, 0)[:4]
case("topk_i32", "topk", [xi], [np.take_along_axis(xi, order, 0), order.astype(np.int64)], {"k": 4, "axis": 0, "largest": 1})

# ---------------------------------------------------------------- nonzero, constant

x = randf((3, 4)) * rng.integers(0, 2, (3, 4))
case("nonzero_f32", "nonzero", [x.astype(np.float32)], [np.stack(np.nonzero(x)).astype(np.int64)])
xi = randi((2, 2, 3), 0, 2)
case("nonzero_i32", "nonzero", [xi], [np.stack(np.nonzero(xi)).astype(np.int64)])
case("nonzero_none_bool", "nonzero", [np.zeros((4,), bool)], [np.zeros((1, 0), np.int64)])
case("constant_f32", "constant", [], [randf((2, 3))])
case("constant_i64", "constant", [], [randi((4,), dt=np.int64)])

# ---------------------------------------------------------------- u16, u32, u64 (at the end: earlier cases keep their draws)

# u64 values at and above 2^63, where reading the bits as int64 would give the wrong order, quotient or double
big = np.array([0, 1, 7, 2**63 - 1, 2**63, 2**63 + 5, 2**64 - 1, 12345678901234567890], np.uint64)
small = np.array([3, 1, 2, 2**63, 5, 2**62, 2**64 - 1, 10], np.uint64)
case("div_u64", "div", [big, small], [big // small])
case("rem_u64", "rem", [big, small], [big % small])
case("max_u64", "max", [big, small], [np.maximum(big, small)])
case("min_u64", "min", [big, small], [np.minimum(big, small)])
case("lt_u64", "lt", [big, small], [big < small])
case("ge_u64", "ge", [big, small], [big >= small])
case("abs_u64", "abs", [big], [big])
case("sign_u64", "sign", [big], [(big != 0).astype(np.uint64)])
amt = np.array([0, 1, 63, 3, 64, 70, 4, 1], np.uint64)
case("shift_right_u64", "shift_right", [big, amt], [np.where(amt >= 64, 0, big >> np.minimum(amt, 63)).astype(np.uint64)])
case("reduce_max_u64", "reduce_max", [big.reshape(2, 4)], [big.reshape(2, 4).max(1)], {"axes": [1]})
case("reduce_min_u64", "reduce_min", [big.reshape(2, 4)], [big.reshape(2, 4).min(0)], {"axes": [0]})
case("argmax_u64", "argmax", [big.reshape(2, 4)], [np.argmax(big.reshape(2, 4), 1).astype(np.int64)], {"axis": 1, "last": 0})
order = np.argsort(big, kind="stable")
case("sort_u64", "sort", [big], [big[order], order.astype(np.int64)], {"axis": 0, "descending": 0})
case("convert_u64_f64", "convert_element_type", [big], [big.astype(np.float64)], {"dtype": D("f64")})
f = np.array([0.0, 1.5, 9.2e18, 1.8e19, 2.0**63, 123.9], np.float64)
case("convert_f64_u64", "convert_element_type", [f], [f.astype(np.uint64)], {"dtype": D("u64")})
w32 = np.array([0, 1, 2**31, 2**32 - 1, 4000000000, 17], np.uint32)
v32 = np.array([5, 2**32 - 1, 3, 2, 7, 2**31], np.uint32)
case("mul_u32", "mul", [w32, v32], [w32 * v32])  # wraps
case("div_u32", "div", [w32, v32], [w32 // v32])
case("gt_u32", "gt", [w32, v32], [w32 > v32])
case("convert_u32_f32", "convert_element_type", [w32], [w32.astype(np.float32)], {"dtype": D("f32")})
case("convert_u32_i64", "convert_element_type", [w32], [w32.astype(np.int64)], {"dtype": D("i64")})
w16 = np.array([0, 1, 40000, 65535, 300, 9], np.uint16)
v16 = np.array([65535, 2, 30000, 65535, 7, 2], np.uint16)
case("add_u16", "add", [w16, v16], [w16 + v16])  # wraps
case("sub_u16", "sub", [w16, v16], [w16 - v16])
case("rem_u16", "rem", [w16, v16], [w16 % v16])
case("shift_right_u16", "shift_right", [w16, np.array([0, 1, 15, 16, 2, 3], np.uint16)],
     [np.array([0, 0, 1, 0, 75, 1], np.uint16)])
case("convert_i32_u16", "convert_element_type", [np.array([5, 65535, 65536, 70000], np.int32)],
     [np.array([5, 65535, 0, 4464], np.uint16)], {"dtype": D("u16")})  # wraps

# random has no exact reference: tests/unit/test_interp.c checks its statistics and Philox's known answers.

with open(os.path.join(ROOT, "cases.txt"), "w") as f:
    f.write("# generated by tests/ref/gen_prim_refs.py; see its docstring for the format\n")
    f.write("\n".join(lines) + "\n")
print(f"{len(lines)} cases in {os.path.relpath(ROOT)}", file=sys.stderr)
