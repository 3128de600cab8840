/* runtime/cuda_rt.c: the CUDA driver API through dlopen("libcuda.so.1"): context, memory, modules, launches, graph capture. */
#include "runtime/primc_rt.h"

#include <dlfcn.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* the driver API's types, declared here so that no CUDA header is needed to build the runtime */
typedef int CUresult;
typedef int CUdevice;
typedef void *CUcontext, *CUmodule, *CUfunction, *CUstream, *CUgraph, *CUgraphExec;
typedef unsigned long long CUdeviceptr;

enum { CU_SUCCESS = 0, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL = 1 };

typedef struct cu_api {
  CUresult (*Init)(unsigned);
  CUresult (*DeviceGet)(CUdevice *, int);
  CUresult (*PrimaryCtxRetain)(CUcontext *, CUdevice);
  CUresult (*PrimaryCtxRelease)(CUdevice);
  CUresult (*CtxSetCurrent)(CUcontext);
  CUresult (*StreamCreate)(CUstream *, unsigned);
  CUresult (*StreamDestroy)(CUstream);
  CUresult (*StreamSynchronize)(CUstream);
  CUresult (*MemAlloc)(CUdeviceptr *, size_t);
  CUresult (*MemFree)(CUdeviceptr);
  CUresult (*MemcpyHtoD)(CUdeviceptr, const void *, size_t);
  CUresult (*MemcpyDtoH)(void *, CUdeviceptr, size_t);
  CUresult (*MemsetD8)(CUdeviceptr, unsigned char, size_t);
  CUresult (*ModuleLoadData)(CUmodule *, const void *);
  CUresult (*ModuleUnload)(CUmodule);
  CUresult (*ModuleGetFunction)(CUfunction *, CUmodule, const char *);
  CUresult (*ModuleGetGlobal)(CUdeviceptr *, size_t *, CUmodule, const char *);
  CUresult (*LaunchKernel)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, CUstream,
                           void **, void **);
  CUresult (*StreamBeginCapture)(CUstream, int);
  CUresult (*StreamEndCapture)(CUstream, CUgraph *);
  CUresult (*GraphInstantiate)(CUgraphExec *, CUgraph, unsigned long long);
  CUresult (*GraphLaunch)(CUgraphExec, CUstream);
  CUresult (*GraphExecDestroy)(CUgraphExec);
  CUresult (*GraphDestroy)(CUgraph);
  CUresult (*GetErrorName)(CUresult, const char **);
} cu_api;

/* exported names (the _v2 ones are what cuda.h's macros point at) */
static const struct {
  const char *name;
  size_t off;
} cu_symbols[] = {
    {"cuInit", offsetof(cu_api, Init)},
    {"cuDeviceGet", offsetof(cu_api, DeviceGet)},
    {"cuDevicePrimaryCtxRetain", offsetof(cu_api, PrimaryCtxRetain)},
    {"cuDevicePrimaryCtxRelease_v2", offsetof(cu_api, PrimaryCtxRelease)},
    {"cuCtxSetCurrent", offsetof(cu_api, CtxSetCurrent)},
    {"cuStreamCreate", offsetof(cu_api, StreamCreate)},
    {"cuStreamDestroy_v2", offsetof(cu_api, StreamDestroy)},
    {"cuStreamSynchronize", offsetof(cu_api, StreamSynchronize)},
    {"cuMemAlloc_v2", offsetof(cu_api, MemAlloc)},
    {"cuMemFree_v2", offsetof(cu_api, MemFree)},
    {"cuMemcpyHtoD_v2", offsetof(cu_api, MemcpyHtoD)},
    {"cuMemcpyDtoH_v2", offsetof(cu_api, MemcpyDtoH)},
    {"cuMemsetD8_v2", offsetof(cu_api, MemsetD8)},
    {"cuModuleLoadData", offsetof(cu_api, ModuleLoadData)},
    {"cuModuleUnload", offsetof(cu_api, ModuleUnload)},
    {"cuModuleGetFunction", offsetof(cu_api, ModuleGetFunction)},
    {"cuModuleGetGlobal_v2", offsetof(cu_api, ModuleGetGlobal)},
    {"cuLaunchKernel", offsetof(cu_api, LaunchKernel)},
    {"cuStreamBeginCapture_v2", offsetof(cu_api, StreamBeginCapture)},
    {"cuStreamEndCapture", offsetof(cu_api, StreamEndCapture)},
    {"cuGraphInstantiateWithFlags", offsetof(cu_api, GraphInstantiate)},
    {"cuGraphLaunch", offsetof(cu_api, GraphLaunch)},
    {"cuGraphExecDestroy", offsetof(cu_api, GraphExecDestroy)},
    {"cuGraphDestroy", offsetof(cu_api, GraphDestroy)},
    {"cuGetErrorName", offsetof(cu_api, GetErrorName)},
};

struct primc_cuda {
  void *lib;
  cu_api api;
  CUdevice dev;
  CUcontext ctx;
  CUstream stream;
  int ctx_retained;
  char err[512];
};

struct primc_cuda_module {
  CUmodule mod;
};

struct primc_cuda_graph {
  CUgraph graph;
  CUgraphExec exec;
};

static const char *result_name(const cu_api *a, CUresult r) {
  const char *s = NULL;
  if (!a->GetErrorName || a->GetErrorName(r, &s) != CU_SUCCESS || !s) s = "unknown CUDA error";
  return s;
}

/* records "what: NAME (code)" and maps the result to a status */
static int check(primc_cuda *c, CUresult r, const char *what, const char *kernel) {
  if (r == CU_SUCCESS) return PRIMC_OK;
  snprintf(c->err, sizeof c->err, "%s%s%s: %s (%d)", what, kernel ? " of kernel " : "", kernel ? kernel : "",
           result_name(&c->api, r), r);
  return PRIMC_ERR_CUDA;
}

static int load_symbols(primc_cuda *c, char *err, size_t errlen) {
  for (size_t i = 0; i < sizeof cu_symbols / sizeof cu_symbols[0]; i++) {
    void *sym = dlsym(c->lib, cu_symbols[i].name);
    if (!sym) {
      snprintf(err, errlen, "libcuda.so.1 has no %s (driver too old)", cu_symbols[i].name);
      return PRIMC_ERR_NODEVICE;
    }
    memcpy((char *)&c->api + cu_symbols[i].off, &sym, sizeof sym);
  }
  return PRIMC_OK;
}

/* cuInit, the device and its primary context, a blocking stream */
static int start(primc_cuda *c, int ordinal, char *err, size_t errlen) {
  cu_api *a = &c->api;
  CUresult r = a->Init(0);
  if (r != CU_SUCCESS) {
    snprintf(err, errlen, "cuInit: %s (%d): no usable CUDA device", result_name(a, r), r);
    return PRIMC_ERR_NODEVICE;
  }
  if ((r = a->DeviceGet(&c->dev, ordinal)) != CU_SUCCESS) {
    snprintf(err, errlen, "cuDeviceGet(%d): %s (%d)", ordinal, result_name(a, r), r);
    return PRIMC_ERR_NODEVICE;
  }
  int s = check(c, a->PrimaryCtxRetain(&c->ctx, c->dev), "cuDevicePrimaryCtxRetain", NULL);
  c->ctx_retained = s == PRIMC_OK;
  if (s == PRIMC_OK) s = check(c, a->CtxSetCurrent(c->ctx), "cuCtxSetCurrent", NULL);
  if (s == PRIMC_OK) s = check(c, a->StreamCreate(&c->stream, 0), "cuStreamCreate", NULL);
  if (s != PRIMC_OK) snprintf(err, errlen, "%s", c->err);
  return s;
}

int primc_cuda_open(int ordinal, primc_cuda **out, char *err, size_t errlen) {
  *out = NULL;
  primc_cuda *c = calloc(1, sizeof *c);
  if (!c) {
    snprintf(err, errlen, "out of memory");
    return PRIMC_ERR_CUDA;
  }
  c->lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  int s = PRIMC_ERR_NODEVICE;
  if (!c->lib) snprintf(err, errlen, "libcuda.so.1 not found (no NVIDIA driver): %s", dlerror());
  else s = load_symbols(c, err, errlen);
  if (s == PRIMC_OK) s = start(c, ordinal, err, errlen);
  if (s != PRIMC_OK) {
    primc_cuda_close(c);
    return s;
  }
  *out = c;
  return PRIMC_OK;
}

void primc_cuda_close(primc_cuda *c) {
  if (!c) return;
  if (c->stream) c->api.StreamDestroy(c->stream);
  if (c->ctx_retained) c->api.PrimaryCtxRelease(c->dev);
  if (c->lib) dlclose(c->lib);
  free(c);
}

const char *primc_cuda_error(const primc_cuda *c) { return c ? c->err : "no CUDA context"; }

/* ---------------------------------------------------------------- memory */

int primc_cuda_alloc(primc_cuda *c, size_t n, primc_devptr *p) {
  CUdeviceptr d = 0;
  int s = check(c, c->api.MemAlloc(&d, n ? n : 1), "cuMemAlloc", NULL);
  *p = s == PRIMC_OK ? (primc_devptr)d : 0;
  return s;
}

int primc_cuda_free(primc_cuda *c, primc_devptr p) {
  return p ? check(c, c->api.MemFree((CUdeviceptr)p), "cuMemFree", NULL) : PRIMC_OK;
}

int primc_cuda_upload(primc_cuda *c, primc_devptr dst, const void *src, size_t n) {
  return n ? check(c, c->api.MemcpyHtoD((CUdeviceptr)dst, src, n), "cuMemcpyHtoD", NULL) : PRIMC_OK;
}

int primc_cuda_download(primc_cuda *c, void *dst, primc_devptr src, size_t n) {
  return n ? check(c, c->api.MemcpyDtoH(dst, (CUdeviceptr)src, n), "cuMemcpyDtoH", NULL) : PRIMC_OK;
}

int primc_cuda_memset(primc_cuda *c, primc_devptr dst, unsigned char v, size_t n) {
  return n ? check(c, c->api.MemsetD8((CUdeviceptr)dst, v, n), "cuMemsetD8", NULL) : PRIMC_OK;
}

/* ---------------------------------------------------------------- modules and launches */

int primc_cuda_module_load(primc_cuda *c, const void *image, primc_cuda_module **m) {
  *m = calloc(1, sizeof **m);
  if (!*m) return check(c, 2 /* CUDA_ERROR_OUT_OF_MEMORY */, "module", NULL);
  int s = check(c, c->api.ModuleLoadData(&(*m)->mod, image), "cuModuleLoadData", NULL);
  if (s != PRIMC_OK) {
    free(*m);
    *m = NULL;
  }
  return s;
}

void primc_cuda_module_unload(primc_cuda *c, primc_cuda_module *m) {
  if (!m) return;
  if (m->mod) c->api.ModuleUnload(m->mod);
  free(m);
}

int primc_cuda_function(primc_cuda *c, primc_cuda_module *m, const char *name, void **fn) {
  CUfunction f = NULL;
  int s = check(c, c->api.ModuleGetFunction(&f, m->mod, name), "cuModuleGetFunction", name);
  *fn = f;
  return s;
}

int primc_cuda_launch(primc_cuda *c, void *fn, const char *name, unsigned grid, unsigned block, unsigned shmem,
                      void **args) {
  return check(c, c->api.LaunchKernel((CUfunction)fn, grid, 1, 1, block, 1, 1, shmem, c->stream, args, NULL),
               "cuLaunchKernel", name);
}

int primc_cuda_launch_on(primc_cuda *c, void *stream, void *fn, const char *name, unsigned grid, unsigned block,
                         unsigned shmem, void **args) {
  CUstream st = stream ? (CUstream)stream : c->stream;
  return check(c, c->api.LaunchKernel((CUfunction)fn, grid, 1, 1, block, 1, 1, shmem, st, args, NULL), "cuLaunchKernel",
               name);
}

void *primc_cuda_stream(const primc_cuda *c) { return c ? c->stream : NULL; }

int primc_cuda_sync(primc_cuda *c) { return check(c, c->api.StreamSynchronize(c->stream), "cuStreamSynchronize", NULL); }

int primc_cuda_module_status(primc_cuda *c, primc_cuda_module *m, int *status) {
  CUdeviceptr p = 0;
  size_t n = 0;
  int zero = 0;
  *status = 0;
  int s = check(c, c->api.ModuleGetGlobal(&p, &n, m->mod, "primc_status"), "cuModuleGetGlobal(primc_status)", NULL);
  if (s == PRIMC_OK && n != sizeof(int)) s = check(c, 1 /* CUDA_ERROR_INVALID_VALUE */, "primc_status size", NULL);
  if (s == PRIMC_OK) s = primc_cuda_sync(c);
  if (s == PRIMC_OK) s = check(c, c->api.MemcpyDtoH(status, p, sizeof(int)), "cuMemcpyDtoH(primc_status)", NULL);
  if (s == PRIMC_OK && *status) s = check(c, c->api.MemcpyHtoD(p, &zero, sizeof zero), "cuMemcpyHtoD(primc_status)", NULL);
  return s;
}

/* ---------------------------------------------------------------- graphs */

int primc_cuda_capture_begin(primc_cuda *c) {
  return check(c, c->api.StreamBeginCapture(c->stream, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL), "cuStreamBeginCapture",
               NULL);
}

int primc_cuda_capture_end(primc_cuda *c, primc_cuda_graph **g) {
  *g = calloc(1, sizeof **g);
  if (!*g) return check(c, 2, "graph", NULL);
  int s = check(c, c->api.StreamEndCapture(c->stream, &(*g)->graph), "cuStreamEndCapture", NULL);
  if (s == PRIMC_OK) s = check(c, c->api.GraphInstantiate(&(*g)->exec, (*g)->graph, 0), "cuGraphInstantiate", NULL);
  if (s != PRIMC_OK) {
    primc_cuda_graph_free(c, *g);
    *g = NULL;
  }
  return s;
}

int primc_cuda_graph_launch(primc_cuda *c, primc_cuda_graph *g) {
  return check(c, c->api.GraphLaunch(g->exec, c->stream), "cuGraphLaunch", NULL);
}

void primc_cuda_graph_free(primc_cuda *c, primc_cuda_graph *g) {
  if (!g) return;
  if (g->exec) c->api.GraphExecDestroy(g->exec);
  if (g->graph) c->api.GraphDestroy(g->graph);
  free(g);
}
