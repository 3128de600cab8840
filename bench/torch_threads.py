"""bench/torch_threads.py: run PyTorch on exactly N threads, its BLAS included.

torch.set_num_threads sets torch's own (OpenMP) pool, but a torch built against a system BLAS (Debian's
python3-torch: BLAS_INFO=generic, libblas.so.3 -> OpenBLAS's pthread build) runs its matmuls in that BLAS's pool,
which keeps the size it read at load time: "1 thread" torch ran its GEMMs on every core (process CPU time twice
its wall time on 2 cores; a 1024x256x1024 mm at 165 GFLOP/s against 100 for one core's FMA peak). set_threads
also sets the pool of any OpenBLAS this process has loaded; blas_threads() says how many that is.
"""
import ctypes
import os

import torch


def _openblas():
    """the loaded OpenBLAS (a handle to the copy torch uses), or None"""
    with open("/proc/self/maps") as f:
        paths = {line.split()[-1] for line in f if "blas" in line.rsplit("/", 1)[-1] and ".so" in line}
    for p in sorted(paths):
        try:
            lib = ctypes.CDLL(p, mode=os.RTLD_NOLOAD)
        except OSError:
            continue
        if hasattr(lib, "openblas_set_num_threads"):
            return lib
    return None


def set_threads(n):
    torch.set_num_threads(n)
    lib = _openblas()
    if lib is not None:
        lib.openblas_set_num_threads(ctypes.c_int(n))


def blas_threads():
    """the OpenBLAS pool's size, or None where torch's matmuls do not run in an OpenBLAS"""
    lib = _openblas()
    if lib is None or not hasattr(lib, "openblas_get_num_threads"):
        return None
    return lib.openblas_get_num_threads()
