"""primc._capi: ctypes declarations of libprimc.so (include/primc.h) and where the library is found.

The library is looked up, first match wins:
  1. $PRIMC_LIB, the path of a libprimc.so (an error when it does not load: no silent fallback);
  2. primc/_lib/libprimc.so, copied into the package by `pip install ./python` from the build dir;
  3. build/libprimc.so of the source tree this file sits in (running from a checkout, without installing).
libprimc.so links executables and libraries against the libprimc_rt.a found beside it.
"""
import ctypes
import os
import threading

_lock = threading.Lock()
_lib = None

INPUT, OUTPUT = 0, 1
EMIT = {"exe": 0, "obj": 1, "lib": 2, "llvm": 3, "asm": 4, "cuda": 5}
TARGET = {"cpu": 0, "cuda": 1}


class Error(Exception):
    """A failure reported by primc: `status` names its kind ("parse", "unsupported", "io", "usage", ...),
    str(error) is primc's message."""

    def __init__(self, message, status="error"):
        super().__init__(message)
        self.status = status


def candidates():
    """The paths tried, in order, with where each comes from."""
    here = os.path.dirname(os.path.abspath(__file__))
    env = os.environ.get("PRIMC_LIB")
    if env:
        return [(env, "$PRIMC_LIB")]
    return [(os.path.join(here, "_lib", "libprimc.so"), "the installed package"),
            (os.path.join(os.path.dirname(os.path.dirname(here)), "build", "libprimc.so"), "the source tree")]


def _declare(lib):
    c_int, c_char_p, c_void_p, c_size_t, c_int64 = ctypes.c_int, ctypes.c_char_p, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int64
    m = c_void_p
    sigs = {
        "primc_version": (c_char_p, []),
        "primc_status_name": (c_char_p, [c_int]),
        "primc_dtype_name": (c_char_p, [c_int]),
        "primc_model_new": (m, []),
        "primc_model_free": (None, [m]),
        "primc_model_error": (c_char_p, [m]),
        "primc_model_set_dim": (c_int, [m, c_char_p, c_int64]),
        "primc_model_set_dim_range": (c_int, [m, c_char_p, c_int64, c_int64]),
        "primc_model_set_dim_spec": (c_int, [m, c_char_p]),
        "primc_model_set_const_spec": (c_int, [m, c_char_p]),
        "primc_model_set_weights_file": (c_int, [m, c_char_p]),
        "primc_model_set_mem_limit": (c_int, [m, c_int64]),
        "primc_model_set_grad": (c_int, [m, c_int]),
        "primc_model_set_jvp": (c_int, [m, c_int]),
        "primc_model_set_vmap": (c_int, [m, c_char_p, c_int64]),
        "primc_model_set_train": (c_int, [m, c_char_p, c_char_p, ctypes.c_double, ctypes.c_double]),
        "primc_model_load_file": (c_int, [m, c_char_p]),
        "primc_model_load_onnx": (c_int, [m, c_void_p, c_size_t, c_char_p]),
        "primc_model_set_opt_level": (c_int, [m, c_int]),
        "primc_model_set_unfused": (c_int, [m, c_int]),
        "primc_model_set_target": (c_int, [m, c_int]),
        "primc_model_set_cpu": (c_int, [m, c_char_p]),
        "primc_model_set_triple": (c_int, [m, c_char_p]),
        "primc_model_set_gpu_arch": (c_int, [m, c_char_p]),
        "primc_model_set_weights_external": (c_int, [m, c_int]),
        "primc_model_set_name": (c_int, [m, c_char_p]),
        "primc_model_set_profile": (c_int, [m, c_int]),
        "primc_model_set_cuda_graphs": (c_int, [m, c_int]),
        "primc_model_set_matmul_precision": (c_int, [m, c_char_p]),
        "primc_model_set_autocast": (c_int, [m, c_char_p]),
        "primc_model_set_autotune": (c_int, [m, c_int]),
        "primc_model_set_autotune_cache": (c_int, [m, c_char_p]),
        "primc_model_set_runtime_dir": (c_int, [m, c_char_p]),
        "primc_model_compile": (c_int, [m, c_int, c_char_p]),
        "primc_model_count": (c_int, [m, c_int]),
        "primc_model_tensor_name": (c_char_p, [m, c_int, c_int]),
        "primc_model_tensor_dtype": (c_int, [m, c_int, c_int]),
        "primc_model_tensor_rank": (c_int, [m, c_int, c_int]),
        "primc_model_tensor_dim": (c_int64, [m, c_int, c_int, c_int]),
        "primc_model_tensor_dim_name": (c_char_p, [m, c_int, c_int, c_int]),
        "primc_model_tensor_dim_range": (c_int, [m, c_int, c_int, c_int, ctypes.POINTER(c_int64), ctypes.POINTER(c_int64)]),
    }
    for name, (res, args) in sigs.items():
        f = getattr(lib, name)
        f.restype, f.argtypes = res, args


def lib():
    """libprimc.so, loaded once; primc.Error saying what was tried when it cannot be."""
    global _lib
    with _lock:
        if _lib is not None:
            return _lib
        tried = []
        for path, origin in candidates():
            if origin != "$PRIMC_LIB" and not os.path.exists(path):
                tried.append(f"{path} ({origin}): absent")
                continue
            try:
                handle = ctypes.CDLL(path, mode=os.RTLD_LOCAL)
                _declare(handle)
            except (OSError, AttributeError) as e:
                tried.append(f"{path} ({origin}): {e}")
                continue
            _lib = handle
            return _lib
        raise Error("cannot load libprimc.so: " + "; ".join(tried) +
                    " (build it with `make`, then `pip install ./python`, or set PRIMC_LIB)", "io")


class Handle:
    """One primc_model handle; every status other than 0 raises Error with the handle's message."""

    def __init__(self):
        self.lib = lib()
        self.m = self.lib.primc_model_new()
        if not self.m:
            raise Error("out of memory", "nomem")

    def close(self):
        if self.m:
            self.lib.primc_model_free(self.m)
            self.m = None

    def __del__(self):
        self.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def call(self, fname, *args):
        status = getattr(self.lib, fname)(self.m, *args)
        if status != 0:
            msg = self.lib.primc_model_error(self.m).decode("utf-8", "replace")
            raise Error(msg or fname + " failed", self.lib.primc_status_name(status).decode())
        return status

    def tensors(self, io):
        """[(name, dtype code, dims, dim names, ranges)] of the loaded model's inputs or outputs"""
        L, m = self.lib, self.m
        out = []
        for i in range(L.primc_model_count(m, io)):
            rank = L.primc_model_tensor_rank(m, io, i)
            dims, names, ranges = [], [], []
            for d in range(rank):
                lo, hi = ctypes.c_int64(), ctypes.c_int64()
                L.primc_model_tensor_dim_range(m, io, i, d, ctypes.byref(lo), ctypes.byref(hi))
                dims.append(L.primc_model_tensor_dim(m, io, i, d))
                n = L.primc_model_tensor_dim_name(m, io, i, d)
                names.append(n.decode() if n else None)
                ranges.append((lo.value, hi.value))
            out.append((L.primc_model_tensor_name(m, io, i).decode("utf-8", "replace"),
                        L.primc_model_tensor_dtype(m, io, i), dims, names, ranges))
        return out
