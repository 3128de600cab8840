"""primc from Python: compile an ONNX model ahead of time with libprimc.so and call it on numpy arrays.

    import primc
    model = primc.compile("model.onnx", dims={"batch": 1})
    y = model(x)                    # numpy in, numpy out

Everything goes through libprimc.so (include/primc.h) and the shared library it compiles; nothing of the
compiler is reimplemented here. See primc._capi for where the library is found.
"""
import ctypes
import os
import re
import shutil
import sys
import tempfile
import threading
import weakref

import numpy as np

from ._capi import EMIT, INPUT, OUTPUT, TARGET, Error, Handle, lib

__all__ = ["compile", "compile_file", "info", "load", "Module", "TensorInfo", "Error", "version"]

# dtype codes of include/primc.h -> numpy dtypes; strings are ml_dtypes' names (optional); the sub-byte ints
# are held one per byte
_NP = {0: np.float16, 1: "bfloat16", 2: np.float32, 3: np.float64, 4: np.int8, 5: np.int16, 6: np.int32,
       7: np.int64, 8: np.uint8, 9: np.bool_, 10: np.complex64, 11: np.uint16, 12: np.uint32, 13: np.uint64,
       14: "float8_e4m3fn", 15: "float8_e4m3fnuz", 16: "float8_e5m2", 17: "float8_e5m2fnuz", 18: np.int8,
       19: np.uint8, 20: np.int8, 21: np.uint8, 22: "float4_e2m1fn", 23: "float8_e8m0fnu"}
_DTYPE_NAMES = ["f16", "bf16", "f32", "f64", "i8", "i16", "i32", "i64", "u8", "bool", "c64", "u16", "u32", "u64",
                "f8e4m3fn", "f8e4m3fnuz", "f8e5m2", "f8e5m2fnuz", "i4", "u4", "i2", "u2", "f4e2m1", "f8e8m0"]
_RUN_STATUS = {1: "a NULL pointer", 2: "weights missing or corrupt", 3: "bad data (e.g. an index out of range)",
               4: "unsupported", 7: "input dims outside the compiled range"}
_UNBOUNDED = 2**63 - 1


def version():
    """The compiler's version, from libprimc.so."""
    return lib().primc_version().decode()


def _np_dtype(code):
    t = _NP.get(code)
    if isinstance(t, str):
        try:
            import ml_dtypes
            t = getattr(ml_dtypes, t, None)
        except ImportError:
            t = None
    return np.dtype(t) if t is not None else None


class TensorInfo:
    """One input or output: name, dtype (a numpy dtype; None where numpy and ml_dtypes have none), dtype_name
    (primc's: "f32", "i64", ...), shape (a tuple; -1 for a dim still symbolic), dim_names (the symbol of each
    dim, None for a fixed one) and ranges ((lo, hi) per dim, inclusive; hi None when unbounded)."""

    def __init__(self, name, code, dims, dim_names=None, ranges=None):
        self.name = name
        self.dtype_code = code
        self.dtype_name = _DTYPE_NAMES[code] if 0 <= code < len(_DTYPE_NAMES) else "?"
        self.dtype = _np_dtype(code)
        self.shape = tuple(int(d) for d in dims)
        self.dim_names = tuple(dim_names) if dim_names else (None,) * len(self.shape)
        rs = ranges if ranges else [(d, d) for d in self.shape]
        self.ranges = tuple((lo, None if hi == _UNBOUNDED else hi) for lo, hi in rs)

    def _dims_text(self):
        parts = []
        for d, n, (lo, hi) in zip(self.shape, self.dim_names, self.ranges):
            parts.append(str(d) if d >= 0 else f"{n}={lo}..{'' if hi is None else hi}")
        return ",".join(parts)

    def __repr__(self):
        return f"TensorInfo({self.name!r}, {self.dtype_name}[{self._dims_text()}])"


def _set_dims(h, dims):
    if not dims:
        return
    if isinstance(dims, str):
        dims = [dims]
    if isinstance(dims, dict):
        for k, v in dims.items():
            if isinstance(v, str):  # "1..8", "32..224%32", "1..512:64"
                h.call("primc_model_set_dim_spec", f"{k}={v}".encode())
            elif isinstance(v, (tuple, list)) and len(v) == 2:
                h.call("primc_model_set_dim_range", str(k).encode(), int(v[0]), int(v[1]))
            elif isinstance(v, (tuple, list)) and len(v) == 3:  # (LO, HI, M): the multiples of M in LO..HI
                h.call("primc_model_set_dim_spec", f"{k}={int(v[0])}..{int(v[1])}%{int(v[2])}".encode())
            elif isinstance(v, (tuple, list)):
                raise Error(f"dim {k!r}: {v!r}: give N, (LO, HI), (LO, HI, M) or a spec string", "usage")
            else:
                h.call("primc_model_set_dim", str(k).encode(), int(v))
    else:
        for spec in dims:
            h.call("primc_model_set_dim_spec", str(spec).encode())


def _const_text(v):
    """a --const value: a number, a bool, or a flat sequence of them (numpy arrays too)"""
    if hasattr(v, "tolist"):
        v = v.tolist()
    if isinstance(v, (list, tuple)):
        return "[" + ",".join(_const_text(x) for x in v) + "]"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return repr(v)
    raise TypeError(f"a const value must be a number, a bool or a flat list of them, not {type(v).__name__}")


def _set_consts(h, consts):
    if not consts:
        return
    items = consts.items() if isinstance(consts, dict) else ((None, c) for c in ([consts] if isinstance(consts, str) else consts))
    for k, v in items:
        h.call("primc_model_set_const_spec", (str(v) if k is None else f"{k}={_const_text(v)}").encode())


def _load(h, model):
    """model: a path, an onnx.ModelProto (serialized) or the bytes of one"""
    if hasattr(model, "SerializeToString"):
        model = model.SerializeToString()
    if isinstance(model, (bytes, bytearray, memoryview)):
        data = bytes(model)
        h.call("primc_model_load_onnx", data, len(data), None)
    elif isinstance(model, (str, os.PathLike)):
        h.call("primc_model_load_file", os.fsencode(model))
    else:
        raise TypeError(f"model must be a path, an onnx.ModelProto or bytes, not {type(model).__name__}")


def _configure(h, opt_level=3, target="cpu", name=None, weights_external=False, unfused=False, profile=False,
               cpu=None, triple=None, gpu_arch=None, cuda_graphs=False, autotune=False, matmul_precision="highest",
               autocast="none"):
    if target not in TARGET:
        raise Error(f"target {target!r} is not one of {', '.join(TARGET)}", "usage")
    h.call("primc_model_set_opt_level", int(opt_level))
    h.call("primc_model_set_target", TARGET[target])
    h.call("primc_model_set_weights_external", int(bool(weights_external)))
    h.call("primc_model_set_unfused", int(bool(unfused)))
    h.call("primc_model_set_profile", int(bool(profile)))
    h.call("primc_model_set_cuda_graphs", int(bool(cuda_graphs)))
    h.call("primc_model_set_autotune", int(bool(autotune)))
    h.call("primc_model_set_matmul_precision", str(matmul_precision).encode())
    h.call("primc_model_set_autocast", str(autocast or "none").encode())
    if name is not None:
        h.call("primc_model_set_name", str(name).encode())
    for fn, v in (("primc_model_set_cpu", cpu), ("primc_model_set_triple", triple), ("primc_model_set_gpu_arch", gpu_arch)):
        if v is not None:
            h.call(fn, str(v).encode())


def _set_transforms(h, grad=False, jvp=False, vmap=None, train=None):
    """grad, jvp: bools; vmap: {"x": 4} or {"x": 4, "y": 4} (one batch size); train: {"loss": "mse" or
    "cross_entropy", "optimizer": "sgd", "momentum", "adam" or "adamw", "lr": 1e-3, "weight_decay": 0}"""
    if grad:
        h.call("primc_model_set_grad", 1)
    if jvp:
        h.call("primc_model_set_jvp", 1)
    if vmap:
        sizes = set(vmap.values())
        if len(sizes) != 1:
            raise Error(f"vmap: one batch size for every input, not {sorted(sizes)}", "usage")
        h.call("primc_model_set_vmap", ",".join(vmap).encode(), int(sizes.pop()))
    if train:
        t = {"loss": "mse", "optimizer": "sgd", "lr": 1e-3, "weight_decay": 0.0, **train}
        unknown = set(t) - {"loss", "optimizer", "lr", "weight_decay"}
        if unknown:
            raise Error(f"train: unknown option(s) {', '.join(sorted(unknown))}", "usage")
        h.call("primc_model_set_train", str(t["loss"]).encode(), str(t["optimizer"]).encode(), float(t["lr"]),
               float(t["weight_decay"]))


def _open(model, dims, mem_limit, consts=None, transforms=None):
    h = Handle()
    try:
        _set_dims(h, dims)
        _set_consts(h, consts)
        _set_transforms(h, **(transforms or {}))
        if mem_limit:
            h.call("primc_model_set_mem_limit", int(mem_limit))
        _load(h, model)
    except BaseException:
        h.close()
        raise
    return h


def _infos(h, io):
    return [TensorInfo(n, c, d, dn, r) for n, c, d, dn, r in h.tensors(io)]


def info(model, dims=None, consts=None):
    """(inputs, outputs) of a model as TensorInfo lists, without compiling it."""
    with _open(model, dims, 0, consts) as h:
        return _infos(h, INPUT), _infos(h, OUTPUT)


def compile_file(model, output, emit="exe", dims=None, opt_level=3, target="cpu", name=None, weights_external=False,
                 unfused=False, profile=False, cpu=None, triple=None, gpu_arch=None, cuda_graphs=False, mem_limit=0,
                 autotune=False, consts=None, matmul_precision="highest", autocast="none", grad=False, jvp=False,
                 vmap=None, train=None):
    """Compiles model to a file, as `primc compile` does: emit is exe, obj (OUT.o + OUT.h), lib (a shared library
    + its header), llvm, asm or cuda; target cpu or cuda (NVRTC at compile time, the driver at run time only);
    autotune: conv rows timed here, cached per CPU model (`primc compile --autotune`); matmul_precision:
    "highest" (f32), "high" or "medium" (bf16 contractions, as torch.set_float32_matmul_precision); autocast: "bf16"
    (MatMul/Gemm and Conv on bf16 operands, f32 sums, the rest f32), "fp16" (the same with a weight on f16-rounded
    operands) or "none"; grad, jvp, vmap, train: the
    graph transforms, as compile() takes them. Returns output."""
    if emit not in EMIT:
        raise Error(f"emit {emit!r} is not one of {', '.join(EMIT)}", "usage")
    with _open(model, dims, mem_limit, consts, dict(grad=grad, jvp=jvp, vmap=vmap, train=train)) as h:
        _configure(h, opt_level, target, name, weights_external, unfused, profile, cpu, triple, gpu_arch, cuda_graphs,
                   autotune, matmul_precision, autocast)
        h.call("primc_model_compile", EMIT[emit], os.fsencode(output))
    return output


def compile(model, dims=None, opt_level=3, threads=None, target="cpu", out_dir=None, *, name="model",
            weights_external=False, unfused=False, profile=False, mem_limit=0, consts=None, matmul_precision="highest",
            autocast="none", grad=False, jvp=False, vmap=None, train=None):
    """Compiles model (an ONNX path, an onnx.ModelProto or its bytes) to a shared library in out_dir (a temporary
    dir, removed with the module, by default) and returns it loaded as a callable Module.

    dims: {"batch": 4} or ["batch=4"] fixes symbolic dims; {"batch": (1, 8)} or ["batch=1..8"] gives a range: the
    module then takes every batch size 1..8 (run-time dims, one compiled program); {"H": (32, 224, 32)} or
    ["H=32..224%32"] every multiple of 32 in that range (strided convs' sizes follow it); ["seq=1..512:64"] or
    {"seq": "1..512:64"} buckets of 64 (on several dims, a bucket per combination);
    consts: {"mode": 1} or ["mode=1"] fixes inputs to constants, as `primc compile --const` (they are then
    no longer inputs of the module);
    threads: the module's thread pool size (default: $PRIMC_NUM_THREADS, else every CPU);
    profile: time every kernel, read back with Module.profile();
    matmul_precision: "highest" (f32, default), "high" or "medium" (bf16 contractions, f32 sums), as
    torch.set_float32_matmul_precision; autocast: "bf16" (MatMul/Gemm and Conv on bf16 operands, f32 sums, the
    rest f32), "fp16" (the same with a weight on f16-rounded operands) or "none";
    grad=True: the module computes the vector-Jacobian product (it takes a cotangent per float output after the
    inputs and returns a gradient per float input and weight after the outputs); jvp=True: the Jacobian-vector
    product (tangents per float input, tangents of the outputs); vmap={"x": 8}: x takes a leading batch dim;
    train={"loss": "cross_entropy", "optimizer": "adam", "lr": 1e-3, "weight_decay": 0}: one training step per
    call (the weights and optimizer buffers are its last inputs and outputs: pass the outputs back).
    .inputs and .outputs name them all."""
    if target != "cpu":
        raise Error(f"target {target!r}: a module runs on numpy arrays on the CPU; compile CUDA code to a file "
                    "with primc.compile_file(model, out, target='cuda')", "usage")
    with _open(model, dims, mem_limit, consts, dict(grad=grad, jvp=jvp, vmap=vmap, train=train)) as h:
        ins = _infos(h, INPUT)
        for t in ins:
            for d, n, (lo, hi) in zip(t.shape, t.dim_names, t.ranges):
                if d < 0 and hi is None:
                    raise Error(f"input {t.name!r}: dim {n!r} ({lo}..) is unbounded: give it a size with "
                                f"dims={{{n!r}: N}} or a range with dims={{{n!r}: (LO, HI)}}", "usage")
        outs = _infos(h, OUTPUT)
        _configure(h, opt_level, "cpu", name, weights_external, unfused, profile, matmul_precision=matmul_precision,
                   autocast=autocast)
        cleanup = out_dir is None
        out_dir = tempfile.mkdtemp(prefix="primc-") if cleanup else os.fspath(out_dir)
        os.makedirs(out_dir, exist_ok=True)
        path = os.path.join(out_dir, name + ".so")
        try:
            h.call("primc_model_compile", EMIT["lib"], os.fsencode(path))
        except BaseException:
            if cleanup:
                shutil.rmtree(out_dir, ignore_errors=True)
            raise
    weights = os.path.join(out_dir, name + ".weights") if weights_external else None
    return Module(path, name, ins, outs, weights=weights, threads=threads, _remove_dir=out_dir if cleanup else None)


# ---------------------------------------------------------------- the compiled module

class _TensorDesc(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char_p), ("dtype", ctypes.c_int32), ("rank", ctypes.c_int32),
                ("dims", ctypes.c_int64 * 8)]


class _ProfKernel(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char_p), ("origin", ctypes.c_char_p), ("bytes", ctypes.c_int64),
                ("calls", ctypes.c_int64), ("ns", ctypes.c_int64)]


class _Profile(ctypes.Structure):
    _fields_ = [("n_kernels", ctypes.c_int32), ("kernels", ctypes.POINTER(_ProfKernel))]


class _ModelDesc(ctypes.Structure):
    """NAME_model, the descriptor every compiled model exports: primc_model_desc of runtime/primc_rt.h"""
    _fields_ = [("name", ctypes.c_char_p), ("run", ctypes.c_void_p), ("load_weights", ctypes.c_void_p),
                ("workspace_size", ctypes.c_int64), ("workspace_align", ctypes.c_int64),
                ("n_inputs", ctypes.c_int32), ("n_outputs", ctypes.c_int32),
                ("inputs", ctypes.POINTER(_TensorDesc)), ("outputs", ctypes.POINTER(_TensorDesc)),
                ("profile", ctypes.POINTER(_Profile)), ("output_dims", ctypes.c_void_p)]


_loaded_paths = set()
_loaded_lock = threading.Lock()


def _dlopen(path, tmp_dirs):
    """ctypes.CDLL(path), except that a path this process loaded before is loaded from a fresh copy: dlopen
    hands back the library already loaded under a name, even when the file was recompiled since."""
    real = os.path.realpath(path)
    with _loaded_lock:
        again = real in _loaded_paths
        _loaded_paths.add(real)
    if again:
        d = tempfile.mkdtemp(prefix="primc-load-")
        tmp_dirs.append(d)
        real = os.path.join(d, os.path.basename(real))
        shutil.copyfile(path, real)
    return ctypes.CDLL(real, mode=os.RTLD_LOCAL)


def _cleanup(dirs, handles=()):
    # dlclose: a model's code and weights leave the process with its module (the runtime's pool joins its
    # threads when the library unloads); ctypes itself never unloads a library
    for h in handles:
        try:
            import _ctypes
            _ctypes.dlclose(h)
        except (ImportError, OSError):
            pass
    for d in dirs:
        shutil.rmtree(d, ignore_errors=True)


class Module:
    """A compiled model loaded from its shared library. Call it with one numpy array per input (positionally, or
    by name as keywords): it returns the output array, or a tuple of them when there are several. C-contiguous
    inputs of the declared dtype are passed without a copy; outputs are new arrays; the workspace is allocated
    once and reused (calls on one module are serialized). .inputs / .outputs are TensorInfo lists."""

    def __init__(self, path, name, inputs, outputs, weights=None, threads=None, _remove_dir=None, _lib=None):
        self.path, self.name = path, name
        self.inputs, self.outputs = list(inputs), list(outputs)
        self._tmp = [_remove_dir] if _remove_dir else []
        self._handles = []
        self._finalizer = weakref.finalize(self, _cleanup, self._tmp, self._handles)
        self._lib = _lib if _lib is not None else _dlopen(path, self._tmp)
        self._handles.append(self._lib._handle)
        try:
            self._run_fn = self._lib[name + "_run"]
            self._dims_fn = self._lib[name + "_output_dims"]
            self._run_dims_fn = self._lib[name + "_run_dims"]
            self._check_dims_fn = self._lib[name + "_check_dims"]
            ws_size = ctypes.c_int64.in_dll(self._lib, name + "_workspace_size").value
        except (AttributeError, ValueError) as e:
            raise Error(f"{path}: not a primc model library named {name!r} ({e})", "io") from None
        self._run_fn.restype = ctypes.c_int
        self._run_fn.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p]
        self._dims_fn.restype = ctypes.c_int
        self._dims_fn.argtypes = [ctypes.c_void_p, ctypes.c_int32, ctypes.POINTER(ctypes.c_int64)]
        self._run_dims_fn.restype = ctypes.c_int
        self._run_dims_fn.argtypes = [ctypes.c_void_p] * 4
        self._check_dims_fn.restype = ctypes.c_int
        self._check_dims_fn.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int64]
        raw = np.empty(ws_size + 64, np.uint8)
        off = (-raw.ctypes.data) % 64
        self._ws = raw[off:off + ws_size + 1]  # 64-byte aligned, never empty
        self._lock = threading.Lock()
        for t in self.inputs + self.outputs:
            if t.dtype is None:
                raise Error(f"{t.name!r} has dtype {t.dtype_name}, which numpy has no type for (install ml_dtypes)",
                            "unsupported")
        if weights is not None:
            try:
                load = self._lib[name + "_load_weights"]
            except AttributeError:
                raise Error(f"{path}: has no {name}_load_weights (its weights are inside it)", "usage") from None
            load.restype, load.argtypes = ctypes.c_int, [ctypes.c_char_p]
            st = load(os.fsencode(weights))
            if st:
                raise Error(f"{weights}: {name}_load_weights returned {st}: {_RUN_STATUS.get(st, 'failed')}", "io")
        if threads is not None:
            self._set_threads(int(threads))

    def _set_threads(self, n):
        # the runtime's pool reads PRIMC_NUM_THREADS once, when it starts: start this library's pool now
        if n < 1:
            raise Error(f"threads={n}: need at least 1", "usage")
        try:
            start = self._lib.primc_num_threads
        except AttributeError:
            return  # a model with no parallel kernel has no pool
        old = os.environ.get("PRIMC_NUM_THREADS")
        os.environ["PRIMC_NUM_THREADS"] = str(n)
        try:
            start.restype = ctypes.c_int
            start()
        finally:
            if old is None:
                del os.environ["PRIMC_NUM_THREADS"]
            else:
                os.environ["PRIMC_NUM_THREADS"] = old

    def __repr__(self):
        return f"<primc.Module {self.name} inputs={self.inputs} outputs={self.outputs}>"

    def _bind(self, args, kwargs):
        if len(args) > len(self.inputs):
            raise Error(f"{len(args)} inputs given, the model takes {len(self.inputs)}", "usage")
        given = list(args) + [None] * (len(self.inputs) - len(args))
        names = [t.name for t in self.inputs]
        for k, v in kwargs.items():
            if k not in names:
                raise Error(f"no input named {k!r} (inputs: {', '.join(names)})", "usage")
            i = names.index(k)
            if given[i] is not None:
                raise Error(f"input {k!r} given twice", "usage")
            given[i] = v
        arrays = []
        for t, a in zip(self.inputs, given):
            if a is None:
                raise Error(f"input {t.name!r} missing", "usage")
            if not isinstance(a, np.ndarray):
                a = np.asarray(a, dtype=t.dtype)
            if a.dtype != t.dtype:
                raise Error(f"input {t.name!r}: dtype {a.dtype}, the model takes {t.dtype} ({t.dtype_name})", "type")
            if a.ndim != len(t.shape) or any(d >= 0 and x != d for x, d in zip(a.shape, t.shape)):
                raise Error(f"input {t.name!r}: shape {a.shape}, the model takes [{t._dims_text()}]", "shape")
            if not (a.flags.c_contiguous and a.flags.aligned):
                a = np.ascontiguousarray(a)
            arrays.append(a)
        return arrays

    def run(self, inputs):
        """inputs: a list in input order or a dict by name; returns the list of outputs"""
        if isinstance(inputs, dict):
            return self._run(self._bind((), inputs))
        return self._run(self._bind(tuple(inputs), {}))

    def __call__(self, *args, **kwargs):
        outs = self._run(self._bind(args, kwargs))
        return outs[0] if len(outs) == 1 else tuple(outs)

    def _run(self, arrays):
        outs = [np.empty(tuple(hi if d < 0 else d for d, (lo, hi) in zip(t.shape, t.ranges)), t.dtype)
                for t in self.outputs]
        ins = (ctypes.c_void_p * max(1, len(arrays)))(*[a.ctypes.data for a in arrays])
        ptrs = (ctypes.c_void_p * max(1, len(outs)))(*[o.ctypes.data for o in outs])
        dims = (ctypes.c_int64 * 8)()
        # each input's actual dims: a dim given as a range takes any size in it (NAME_check_dims says why not)
        shapes = [(ctypes.c_int64 * 8)(*a.shape) for a in arrays]
        in_dims = (ctypes.c_void_p * max(1, len(arrays)))(*[ctypes.addressof(x) for x in shapes])
        msg = ctypes.create_string_buffer(512)
        if self._check_dims_fn(in_dims, msg, len(msg)):
            raise Error(msg.value.decode(errors="replace"), "shape")
        with self._lock:
            st = self._run_dims_fn(ins, in_dims, ptrs, self._ws.ctypes.data)
            if st:
                raise Error(f"{self.name}_run returned {st}: {_RUN_STATUS.get(st, 'failed')}", "runtime")
            for i, o in enumerate(outs):  # an output sized by the data (NonZero) is cut to what the run wrote
                if self._dims_fn(self._ws.ctypes.data, i, dims) == 0:
                    shape = tuple(dims[d] for d in range(o.ndim))
                    if shape != o.shape:
                        outs[i] = o.reshape(-1)[:int(np.prod(shape))].reshape(shape)
        return outs

    def profile(self, reset=False):
        """Per-kernel counters of a module compiled with profile=True: a list of dicts (kernel, origin, calls,
        total_ms, mean_us, bytes) in kernel order, since the load or the last reset."""
        desc = _ModelDesc.in_dll(self._lib, self.name + "_model")
        if not desc.profile:
            raise Error(f"{self.name} was compiled without profile=True", "usage")
        p = desc.profile.contents
        rows = []
        for k in range(p.n_kernels):
            r = p.kernels[k]
            rows.append({"kernel": (r.name or b"").decode(), "origin": (r.origin or b"").decode(), "calls": r.calls,
                         "total_ms": r.ns / 1e6, "mean_us": r.ns / 1e3 / r.calls if r.calls else 0.0,
                         "bytes": r.bytes})
        if reset:
            for k in range(p.n_kernels):
                p.kernels[k].calls = p.kernels[k].ns = 0
        return rows


def load(path, name=None, weights=None, threads=None):
    """A model library compiled earlier (primc compile --emit lib, or compile_file(..., emit="lib")) as a Module.
    name: its entry points' prefix (default: from the file name, as primc derives it); weights: the side file of
    a build with external weights."""
    if name is None:  # as primc's pc_path_ident derives it
        name = re.sub(r"[^A-Za-z0-9_]", "_", os.path.splitext(os.path.basename(os.fspath(path)))[0]) or "model"
        if not (name[0].isalpha() or name[0] == "_"):
            name = "m" + name
    tmp = []
    try:
        handle = _dlopen(path, tmp)
        desc = _ModelDesc.in_dll(handle, name + "_model")
    except (OSError, ValueError) as e:
        _cleanup(tmp)
        raise Error(f"{path}: not a primc model library named {name!r} ({e})", "io") from None

    def infos(n, arr):
        return [TensorInfo(arr[i].name.decode(), arr[i].dtype, [arr[i].dims[d] for d in range(arr[i].rank)])
                for i in range(n)]
    m = Module(os.fspath(path), name, infos(desc.n_inputs, desc.inputs), infos(desc.n_outputs, desc.outputs),
               weights=weights, threads=threads, _lib=handle)
    m._tmp.extend(tmp)
    return m
