/* codegen/nvrtc.c: compiles rendered CUDA C to cubin + PTX with NVRTC, loaded through dlopen so primc builds and runs without CUDA. */
#include "codegen/codegen.h"

#include <ctype.h>
#include <dlfcn.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

/* NVRTC's C API, declared here so that no CUDA header is needed to build primc */
typedef int nvrtcResult;
typedef struct _nvrtcProgram *nvrtcProgram;

struct pc_nvrtc {
  void *lib;
  nvrtcResult (*create)(nvrtcProgram *, const char *, const char *, int, const char *const *, const char *const *);
  nvrtcResult (*compile)(nvrtcProgram, int, const char *const *);
  nvrtcResult (*log_size)(nvrtcProgram, size_t *);
  nvrtcResult (*log)(nvrtcProgram, char *);
  nvrtcResult (*cubin_size)(nvrtcProgram, size_t *);
  nvrtcResult (*cubin)(nvrtcProgram, char *);
  nvrtcResult (*ptx_size)(nvrtcProgram, size_t *);
  nvrtcResult (*ptx)(nvrtcProgram, char *);
  nvrtcResult (*destroy)(nvrtcProgram *);
  const char *(*error_string)(nvrtcResult);
};

static const struct {
  const char *name;
  size_t off;
} symbols[] = {
    {"nvrtcCreateProgram", offsetof(struct pc_nvrtc, create)},
    {"nvrtcCompileProgram", offsetof(struct pc_nvrtc, compile)},
    {"nvrtcGetProgramLogSize", offsetof(struct pc_nvrtc, log_size)},
    {"nvrtcGetProgramLog", offsetof(struct pc_nvrtc, log)},
    {"nvrtcGetCUBINSize", offsetof(struct pc_nvrtc, cubin_size)},
    {"nvrtcGetCUBIN", offsetof(struct pc_nvrtc, cubin)},
    {"nvrtcGetPTXSize", offsetof(struct pc_nvrtc, ptx_size)},
    {"nvrtcGetPTX", offsetof(struct pc_nvrtc, ptx)},
    {"nvrtcDestroyProgram", offsetof(struct pc_nvrtc, destroy)},
    {"nvrtcGetErrorString", offsetof(struct pc_nvrtc, error_string)},
};

/* where libnvrtc is looked for, in order ($PRIMC_NVRTC first when set) */
static const char *const lib_paths[] = {
    "libnvrtc.so", "/usr/local/cuda/lib64/libnvrtc.so", "libnvrtc.so.13", "libnvrtc.so.12",
    "/usr/local/cuda/lib64/libnvrtc.so.13", "/usr/local/cuda/lib64/libnvrtc.so.12",
};

/* NVRTC stays mapped once loaded (RTLD_NODELETE): it keeps global allocations of
 * its own, such as its C++ runtime's pools, that unloading it would leak */
#define NVRTC_DLOPEN_FLAGS (RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE)

static void *open_lib(char *err, size_t errlen) {
  const char *env = getenv("PRIMC_NVRTC");
  void *lib = env && *env ? dlopen(env, NVRTC_DLOPEN_FLAGS) : NULL;
  for (size_t i = 0; !lib && i < sizeof lib_paths / sizeof lib_paths[0]; i++) lib = dlopen(lib_paths[i], NVRTC_DLOPEN_FLAGS);
  if (!lib) snprintf(err, errlen, "NVRTC not found (libnvrtc.so in the library path or /usr/local/cuda/lib64; set PRIMC_NVRTC to its path)");
  return lib;
}

pc_nvrtc *pc_nvrtc_open(char *err, size_t errlen) {
  void *lib = open_lib(err, errlen);
  if (!lib) return NULL;
  pc_nvrtc *nv = calloc(1, sizeof *nv);
  if (!nv) {
    dlclose(lib);
    snprintf(err, errlen, "out of memory");
    return NULL;
  }
  nv->lib = lib;
  for (size_t i = 0; i < sizeof symbols / sizeof symbols[0]; i++) {
    void *sym = dlsym(lib, symbols[i].name);
    if (!sym) {
      snprintf(err, errlen, "NVRTC library has no %s", symbols[i].name);
      pc_nvrtc_close(nv);
      return NULL;
    }
    memcpy((char *)nv + symbols[i].off, &sym, sizeof sym);
  }
  return nv;
}

void pc_nvrtc_close(pc_nvrtc *nv) {
  if (!nv) return;
  if (nv->lib) dlclose(nv->lib);
  free(nv);
}

void pc_cuda_binary_free(pc_cuda_binary *b) {
  if (!b) return;
  free(b->cubin);
  free(b->ptx);
  free(b->log);
  memset(b, 0, sizeof *b);
}

/* ---------------------------------------------------------------- error messages */

/* the kernel whose definition is the last one starting at or before line `at` (1-based) */
static void kernel_at_line(const char *src, long at, char *name, size_t n) {
  snprintf(name, n, "(prelude)");
  long ln = 1;
  for (const char *s = src; *s && ln <= at; s++) {
    if (s == src || s[-1] == '\n') {
      const char *lb = strstr(s, "__launch_bounds__(");
      const char *eol = strchr(s, '\n');
      if (lb && (!eol || lb < eol) && !strncmp(s, "extern \"C\"", 10)) {
        const char *id = strchr(lb, ')');
        size_t k = 0;
        for (id = id ? id + 1 : lb; *id == ' '; id++) {
        }
        while ((isalnum((unsigned char)id[k]) || id[k] == '_') && k + 1 < n) k++;
        snprintf(name, n, "%.*s", (int)k, id);
      }
    }
    if (*s == '\n') ln++;
  }
}

/* "primc.cu(LINE): error: ..." -> that line of the log, and LINE */
static const char *first_error(const char *log, long *at) {
  for (const char *s = strstr(log, "): error"); s; s = strstr(s + 1, "): error")) {
    const char *open = s;
    while (open > log && open[-1] != '(' && open[-1] != '\n') open--;
    if (open > log && open[-1] == '(') {
      *at = strtol(open, NULL, 10);
      const char *bol = open;
      while (bol > log && bol[-1] != '\n') bol--;
      return bol;
    }
  }
  return NULL;
}

static pc_status compile_error(pc_graph *g, const char *src, const char *log, const char *what) {
  long at = 0;
  const char *e = log ? first_error(log, &at) : NULL;
  if (!e) return pc_fail(g, PC_ERR_INTERNAL, "NVRTC: %s: %.300s", what, log && *log ? log : "(no log)");
  char kname[96];
  kernel_at_line(src, at, kname, sizeof kname);
  const char *eol = strchr(e, '\n');
  int len = eol ? (int)(eol - e) : (int)strlen(e);
  return pc_fail(g, PC_ERR_INTERNAL, "NVRTC: kernel %s does not compile: %.*s", kname, len > 360 ? 360 : len, e);
}

/* ---------------------------------------------------------------- compile */

static char *program_log(pc_nvrtc *nv, nvrtcProgram prog) {
  size_t n = 0;
  if (nv->log_size(prog, &n) != 0) n = 0;
  char *log = calloc(1, n + 1);
  if (log && n && nv->log(prog, log) != 0) log[0] = 0;
  return log;
}

static pc_status fetch(pc_graph *g, pc_nvrtc *nv, nvrtcProgram prog, int want_cubin, pc_cuda_binary *out) {
  size_t n = 0;
  if (nv->ptx_size(prog, &n) != 0 || !(out->ptx = calloc(1, n + 1)) || nv->ptx(prog, out->ptx) != 0)
    return pc_fail(g, PC_ERR_INTERNAL, "NVRTC: no PTX");
  out->ptx_size = n && !out->ptx[n - 1] ? n - 1 : n; /* without the terminating NUL */
  if (!want_cubin) return PC_OK;
  n = 0;
  if (nv->cubin_size(prog, &n) != 0 || !n || !(out->cubin = malloc(n)) || nv->cubin(prog, out->cubin) != 0)
    return pc_fail(g, PC_ERR_INTERNAL, "NVRTC: no cubin");
  out->cubin_size = n;
  return PC_OK;
}

pc_status pc_nvrtc_compile(pc_graph *g, pc_nvrtc *nv, const char *src, const char *arch, pc_cuda_binary *out) {
  memset(out, 0, sizeof *out);
  if (!arch || !*arch) arch = "sm_90";
  if (strncmp(arch, "sm_", 3) && strncmp(arch, "compute_", 8))
    return pc_fail(g, PC_ERR_ATTR, "GPU architecture \"%s\": expected sm_NN or compute_NN", arch);
  char opt[64];
  snprintf(opt, sizeof opt, "--gpu-architecture=%s", arch);
  const char *opts[] = {opt, "--std=c++17"};
  nvrtcProgram prog = NULL;
  nvrtcResult r = nv->create(&prog, src, "primc.cu", 0, NULL, NULL);
  if (r != 0) return pc_fail(g, PC_ERR_INTERNAL, "NVRTC: cannot create a program: %s", nv->error_string(r));
  r = nv->compile(prog, 2, opts);
  out->log = program_log(nv, prog);
  pc_status s = PC_OK;
  if (r != 0) s = compile_error(g, src, out->log, nv->error_string(r));
  else s = fetch(g, nv, prog, !strncmp(arch, "sm_", 3), out);
  nv->destroy(&prog);
  if (s != PC_OK) {
    char *log = out->log;
    out->log = NULL;
    pc_cuda_binary_free(out);
    out->log = log;
  }
  return s;
}
