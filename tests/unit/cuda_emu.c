/* tests/unit/cuda_emu.c: the CPU emulator of rendered CUDA C (see cuda_emu.h): a C++ shim put ahead of the program,
 * g++ to a shared object, and its launcher called through dlopen. */
#include "tests/unit/cuda_emu.h"

#include "codegen/codegen.h"
#include "codegen/kir.h"
#include "ir/ir.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct pc_emu {
  char dir[64];
  void *so;
  int (*run)(void *fn, unsigned grid, unsigned block, void **args, int nargs);
  int *status;
};

/* CUDA's names on the host: the running block's threads as fibers that switch at __syncthreads, blocks in turn */
static const char *const shim[] = {
    "#include <math.h>",
    "#include <string.h>",
    "#include <stdlib.h>",
    "#include <ucontext.h>",
    "#define __device__",
    "#define __global__",
    "#define __forceinline__ inline",
    "#define __launch_bounds__(n)",
    "#define __shared__ static",
    "#define __align__(n) __attribute__((aligned(n)))",
    "struct pc_dim3 { unsigned x, y, z; };",
    "static pc_dim3 threadIdx, blockIdx, blockDim, gridDim;",
    /* the block's threads are fibers on one host thread: each runs to its next __syncthreads, then the next one */
    "static ucontext_t pc_emu_main, pc_emu_fib[1024];",
    "static int pc_emu_done[1024], pc_emu_wait[1024]; /* wait: 1 at __syncthreads, 2 at a warp's shuffle */",
    "static unsigned long long pc_emu_slot[1024];",
    "static inline void pc_emu_yield(int why) { pc_emu_wait[threadIdx.x] = why; swapcontext(&pc_emu_fib[threadIdx.x], &pc_emu_main); }",
    "static inline void __syncthreads() { pc_emu_yield(1); }",
    /* the value lane p of the block holds (the caller's own where p is past the block), every lane of the warp there */
    "template <class T> static T pc_emu_shfl(T v, unsigned p) {",
    "  const unsigned t = threadIdx.x;",
    "  memcpy(&pc_emu_slot[t], &v, sizeof v);",
    "  pc_emu_yield(2);",
    "  T r = v;",
    "  if (p < blockDim.x) memcpy(&r, &pc_emu_slot[p], sizeof r);",
    "  pc_emu_yield(2);",
    "  return r;",
    "}",
    "template <class T> static T __shfl_down_sync(unsigned, T v, int o) {",
    "  const unsigned t = threadIdx.x;",
    "  return pc_emu_shfl(v, (t & 31u) + (unsigned)o < 32u ? t + (unsigned)o : t);",
    "}",
    "template <class T> static T __shfl_xor_sync(unsigned, T v, int o) {",
    "  return pc_emu_shfl(v, (threadIdx.x & ~31u) | ((threadIdx.x & 31u) ^ (unsigned)o));",
    "}",
    "template <class T> static T __shfl_sync(unsigned, T v, int src) {",
    "  return pc_emu_shfl(v, (threadIdx.x & ~31u) | ((unsigned)src & 31u));",
    "}",
    "static inline void __syncwarp() { pc_emu_yield(2); }",
    "static inline void __threadfence() {}",
    "static inline unsigned atomicAdd(unsigned *p, unsigned v) { unsigned o = *p; *p = o + v; return o; }",
    "template <class T> static inline T __ldcg(const T *p) { return *p; }",
    "struct __attribute__((aligned(16))) float4 { float x, y, z, w; };",
    "template <class A, class B> static inline A pc_emu_bits(B b) { A a; memcpy(&a, &b, sizeof a); return a; }",
    "static inline float __int_as_float(int i) { return pc_emu_bits<float>(i); }",
    "static inline float __uint_as_float(unsigned i) { return pc_emu_bits<float>(i); }",
    "static inline unsigned __float_as_uint(float f) { return pc_emu_bits<unsigned>(f); }",
    "static inline double __longlong_as_double(long long i) { return pc_emu_bits<double>(i); }",
    "static inline float __fadd_rn(float a, float b) { return a + b; }",
    "static inline float __fmul_rn(float a, float b) { return a * b; }",
    "static inline float __fdiv_rn(float a, float b) { return a / b; }",
    "static inline float pc_h2f(unsigned short h) { return (float)pc_emu_bits<_Float16>(h); }",
    "static inline unsigned short pc_f2h(float f) { return pc_emu_bits<unsigned short>((_Float16)f); }",
    /* cvt.rna.tf32.f32: 10 mantissa bits, to nearest, ties away from zero */
    "template <int U = 0> float pc_tf32(float x) {",
    "  unsigned u = __float_as_uint(x);",
    "  if ((u & 0x7f800000u) != 0x7f800000u) u = (u + 0x1000u) & 0xffffe000u;",
    "  return __uint_as_float(u);",
    "}",
    /* mma.sync m16n8k8 tf32: lane l holds A(l/4 + 8 (r % 2), l % 4 + 4 (r / 2)) in a[r], B(k = l % 4 + 4 r, n = l / 4)
     * in b[r], C(l/4 + 8 (r / 2), 2 (l % 4) + r % 2) in c[r]; the warp's fragments meet in statics */
    "static float pc_emu_a[32][16][8], pc_emu_b[32][8][8];",
    "template <int U = 0> void pc_mma_tf32(float *c, const unsigned *a, const unsigned *b) {",
    "  const int l = threadIdx.x & 31, w = threadIdx.x >> 5, g = l >> 2, t = l & 3;",
    "  for (int r = 0; r < 4; r++) pc_emu_a[w][g + 8 * (r % 2)][t + 4 * (r / 2)] = __uint_as_float(a[r]);",
    "  for (int r = 0; r < 2; r++) pc_emu_b[w][t + 4 * r][g] = __uint_as_float(b[r]);",
    "  __syncthreads();",
    "  for (int r = 0; r < 4; r++) {",
    "    float s = 0;",
    "    for (int k = 0; k < 8; k++) s += pc_emu_a[w][g + 8 * (r / 2)][k] * pc_emu_b[w][k][2 * t + r % 2];",
    "    c[r] += s;",
    "  }",
    "  __syncthreads();",
    "}",
    /* mma.sync m16n8k16 bf16 / f16 (F16 0 / 1): each .b32 two halves, the low one first; lane l holds A(l/4 + 8 (r % 2),
     * 2 (l % 4) + 8 (r / 2) + h) in half h of a[r], B(k = 2 (l % 4) + 8 r + h, n = l/4) in half h of b[r], C as m16n8k8's.
     * The products are exact; summed in double with c and rounded once (the hardware's order is not defined) */
    "static double pc_emu_a16[32][16][16], pc_emu_b16[32][16][8];",
    "template <int F16> static double pc_emu_half(unsigned bits) {",
    "  bits &= 0xffffu;",
    "  return F16 ? (double)pc_emu_bits<_Float16>((unsigned short)bits) : (double)__uint_as_float(bits << 16);",
    "}",
    "template <int F16> static void pc_emu_mma16(float *c, const unsigned *a, const unsigned *b) {",
    "  const int l = threadIdx.x & 31, w = threadIdx.x >> 5, g = l >> 2, t = l & 3;",
    "  for (int r = 0; r < 4; r++)",
    "    for (int h = 0; h < 2; h++) pc_emu_a16[w][g + 8 * (r % 2)][2 * t + 8 * (r / 2) + h] = pc_emu_half<F16>(a[r] >> (16 * h));",
    "  for (int r = 0; r < 2; r++)",
    "    for (int h = 0; h < 2; h++) pc_emu_b16[w][2 * t + 8 * r + h][g] = pc_emu_half<F16>(b[r] >> (16 * h));",
    "  __syncthreads();",
    "  for (int r = 0; r < 4; r++) {",
    "    double s = c[r];",
    "    for (int k = 0; k < 16; k++) s += pc_emu_a16[w][g + 8 * (r / 2)][k] * pc_emu_b16[w][k][2 * t + r % 2];",
    "    c[r] = (float)s;",
    "  }",
    "  __syncthreads();",
    "}",
    "template <int U = 0> void pc_mma_bf16(float *c, const unsigned *a, const unsigned *b) { pc_emu_mma16<0>(c, a, b); }",
    /* cvt.rn.bf16x2 rounds as the prelude's pc_f2bf, defined after this shim */
    "inline unsigned short pc_f2bf(float f);",
    "template <int U = 0> unsigned pc_pk_bf16(float lo, float hi) { return pc_f2bf(lo) | (unsigned)pc_f2bf(hi) << 16; }",
    "template <int U = 0> unsigned pc_pk_f16(float lo, float hi) { return pc_f2h(lo) | (unsigned)pc_f2h(hi) << 16; }",
    /* cp.async as a copy done at once: the kernels wait for their groups before they read */
    "template <int U = 0> void pc_cp4(float *dst, const float *src, bool ok) { *dst = ok ? *src : 0.0f; }",
    "template <int U = 0> void pc_cp_commit() {}",
    "template <int N> void pc_cp_wait() {}",
    "template <int U = 0> void pc_mma_f16(float *c, const unsigned *a, const unsigned *b) { pc_emu_mma16<1>(c, a, b); }",
    "typedef void (*pc_emu_k)(void *, void *, void *, void *, void *, void *, void *, void *, void *, void *, void *, void *,",
    "                         void *, void *, void *, void *);",
    "static void *pc_emu_fn, **pc_emu_args;",
    "static void pc_emu_entry() {",
    "  void **a = pc_emu_args;",
    "  ((pc_emu_k)pc_emu_fn)(a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11], a[12], a[13], a[14], a[15]);",
    "  pc_emu_done[threadIdx.x] = 1;",
    "}",
    "/* every kernel takes pointers only: called with 16, the x86-64 calling convention drops the extra ones */",
    "static char *pc_emu_stacks; /* the threads' stacks, 256 MB, given back when the test unloads the module */",
    "__attribute__((destructor)) static void pc_emu_unload() { free(pc_emu_stacks); }",
    "extern \"C\" int pc_emu_run(void *fn, unsigned grid, unsigned block, void **args, int nargs) {",
    "  static void *a[16];",
    "  char *&stacks = pc_emu_stacks;",
    "  const size_t stack = 256 << 10;",
    "  if (nargs > 16 || block > 1024 || block == 0) return 0;",
    "  if (!stacks && !(stacks = (char *)malloc(stack * 1024))) return 0;",
    "  for (int i = 0; i < 16; i++) a[i] = i < nargs ? args[i] : 0;",
    "  pc_emu_fn = fn, pc_emu_args = a;",
    "  gridDim = {grid, 1, 1}, blockDim = {block, 1, 1};",
    "  for (unsigned b = 0; b < grid; b++) {",
    "    blockIdx = {b, 0, 0};",
    "    for (unsigned t = 0; t < block; t++) {",
    "      getcontext(&pc_emu_fib[t]);",
    "      pc_emu_fib[t].uc_stack.ss_sp = stacks + t * stack;",
    "      pc_emu_fib[t].uc_stack.ss_size = stack;",
    "      pc_emu_fib[t].uc_link = &pc_emu_main;",
    "      makecontext(&pc_emu_fib[t], pc_emu_entry, 0);",
    "      pc_emu_done[t] = 0;",
    "      pc_emu_wait[t] = 0;",
    "    }",
    "    /* every running thread to its next wait or its end, then release what waits complete; the passes alternate",
    "     * between ascending and descending thread order, so that a missing barrier shows (thread 0 storing a result",
    "     * the others read runs last every other pass) */",
    "    for (unsigned pass = 0;; pass++) {",
    "      int ran = 0, left = 0;",
    "      for (unsigned u = 0; u < block; u++) {",
    "        const unsigned t = pass & 1 ? block - 1 - u : u;",
    "        if (pc_emu_done[t] || pc_emu_wait[t]) continue;",
    "        threadIdx = {t, 0, 0};",
    "        swapcontext(&pc_emu_main, &pc_emu_fib[t]);",
    "        ran = 1;",
    "      }",
    "      int all_sync = 1, released = 0;",
    "      for (unsigned t = 0; t < block; t++) left += !pc_emu_done[t], all_sync &= pc_emu_done[t] || pc_emu_wait[t] == 1;",
    "      if (!left) break;",
    "      if (all_sync) {",
    "        for (unsigned t = 0; t < block; t++) pc_emu_wait[t] = 0;",
    "        continue;",
    "      }",
    "      for (unsigned w = 0; w < block; w += 32) { /* a warp whose running lanes all wait at a shuffle */",
    "        int all = 1, any = 0;",
    "        for (unsigned t = w; t < w + 32 && t < block; t++)",
    "          if (!pc_emu_done[t]) all &= pc_emu_wait[t] == 2, any = 1;",
    "        if (all && any)",
    "          for (unsigned t = w; t < w + 32 && t < block; t++) pc_emu_wait[t] = 0, released = 1;",
    "      }",
    "      if (!ran && !released) return 0; /* threads wait on what cannot come: a divergent barrier */",
    "    }",
    "  }",
    "  return 1;",
    "}",
};

pc_emu *pc_emu_compile(const char *src, char *err, size_t errlen, int *no_compiler) {
  *no_compiler = 0;
  if (system("g++ --version >/dev/null 2>&1") != 0) {
    *no_compiler = 1;
    snprintf(err, errlen, "no g++ to compile the CUDA C for the CPU emulator");
    return NULL;
  }
  pc_emu *e = calloc(1, sizeof *e);
  snprintf(e->dir, sizeof e->dir, "/tmp/primc-emu-XXXXXX");
  if (!mkdtemp(e->dir)) {
    snprintf(err, errlen, "mkdtemp failed");
    free(e);
    return NULL;
  }
  char path[128], so[128], log[128], cmd[1024];
  snprintf(path, sizeof path, "%s/prog.cc", e->dir);
  snprintf(so, sizeof so, "%s/prog.so", e->dir);
  snprintf(log, sizeof log, "%s/log", e->dir);
  FILE *f = fopen(path, "w");
  if (f) {
    fputs("#define PC_EMU 1\n", f);
    for (size_t i = 0; i < sizeof shim / sizeof *shim; i++) fprintf(f, "%s\n", shim[i]);
    fputs(src, f);
    fclose(f);
  }
  snprintf(cmd, sizeof cmd, "g++ -std=c++17 -O1 -w -fPIC -shared -pthread -o %s %s >%s 2>&1", so, path, log);
  if (!f || system(cmd) != 0) {
    char buf[400] = "";
    FILE *l = fopen(log, "r");
    if (l) buf[fread(buf, 1, sizeof buf - 1, l)] = 0, fclose(l);
    snprintf(err, errlen, "g++ failed on the emulated CUDA C: %s", buf);
    pc_emu_close(e);
    return NULL;
  }
  e->so = dlopen(so, RTLD_NOW | RTLD_LOCAL);
  e->run = e->so ? (int (*)(void *, unsigned, unsigned, void **, int))dlsym(e->so, "pc_emu_run") : NULL;
  e->status = e->so ? (int *)dlsym(e->so, "primc_status") : NULL;
  if (!e->run || !e->status) {
    snprintf(err, errlen, "emulator: %s", e->so ? "pc_emu_run or primc_status missing" : dlerror());
    pc_emu_close(e);
    return NULL;
  }
  return e;
}

int pc_emu_launch(pc_emu *e, const char *name, int64_t grid, int block, void **args, int nargs, char *err, size_t errlen) {
  void *fn = dlsym(e->so, name);
  if (!fn || grid < 1 || grid > 0xffffffffLL) {
    snprintf(err, errlen, "%s: %s", name, fn ? "bad grid" : "no such kernel");
    return 0;
  }
  if (!e->run(fn, (unsigned)grid, (unsigned)block, args, nargs)) {
    snprintf(err, errlen, "%s: could not start %d threads", name, block);
    return 0;
  }
  return 1;
}

int pc_emu_status(pc_emu *e) { return *e->status; }

void pc_emu_close(pc_emu *e) {
  if (!e) return;
  if (e->so) dlclose(e->so);
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf %s", e->dir);
  if (system(cmd) != 0) { /* a temporary directory left behind */
  }
  free(e);
}

char *pc_emu_render(pc_graph *g, kir_program *p, pc_cuda_launch **launches) { return pc_emu_render_sm(g, 0, p, launches); }

char *pc_emu_render_sm(pc_graph *g, int sm, kir_program *p, pc_cuda_launch **launches) {
  char *src = NULL;
  size_t len = 0;
  if (g->status || kir_build_cuda(g, p, sm ? sm : 90) != PC_OK) return NULL; /* as codegen/cuda.c builds it */
  FILE *f = open_memstream(&src, &len);
  pc_status st = f ? pc_cuda_render_program(p, f, launches) : PC_ERR_NOMEM;
  if (f) fclose(f);
  if (st != PC_OK) return free(src), NULL;
  if (getenv("PRIMC_CUDA_DUMP")) fputs(src, stderr);
  return src;
}

int pc_emu_run(pc_emu *e, const kir_program *p, const pc_cuda_launch *L, const kir_cuda_dyn *dyn, const int64_t *syms,
               void *const *ins, void *const *outs, unsigned char *wt, unsigned char *ws, char *err, size_t errlen) {
  int ok = 1;
  for (int k = 0; ok && k < p->n_kernels; k++) {
    if (!L[k].grid) continue; /* run by the kernel before it */
    int64_t grid = L[k].grid, w[PC_CUDA_GRID_FACTORS];
    if (dyn) { /* the grid made for the dims, as the host side does */
      for (int f = 0; f < L[k].n_work; f++) w[f] = kir_poly_eval(&dyn->work[k * PC_CUDA_GRID_FACTORS + f], dyn->n_syms, syms);
      grid = pc_cuda_grid(L[k].n_work, w, L[k].per);
    }
    void *args[64];
    for (int a = 0; a < L[k].n_args && a < 64; a++) {
      if (L[k].args[a] < 0) { /* a run-time dim's value, passed as the kernel's long long */
        args[a] = (void *)(intptr_t)syms[-1 - L[k].args[a]];
        continue;
      }
      const kir_buf *b = &p->bufs[L[k].args[a]];
      args[a] = b->place == KP_INPUT ? ins[b->index] : b->place == KP_OUTPUT ? outs[b->index]
                : b->place == KP_CONST ? (void *)(wt + b->offset) : (void *)(ws + b->offset);
    }
    ok = pc_emu_launch(e, L[k].name, grid, L[k].block, args, L[k].n_args, err, errlen);
  }
  if (ok && pc_emu_status(e)) ok = 0, snprintf(err, errlen, "a kernel reported bad data (primc_status %d)", pc_emu_status(e));
  return ok;
}

int pc_emu_graph(pc_graph *g, void *const *ins, void *const *outs, int *n_kernels, char *err, size_t errlen) {
  return pc_emu_graph_sm(g, 0, ins, outs, n_kernels, err, errlen);
}

int pc_emu_graph_sm(pc_graph *g, int sm, void *const *ins, void *const *outs, int *n_kernels, char *err, size_t errlen) {
  kir_program p;
  pc_cuda_launch *L = NULL;
  char *src = pc_emu_render_sm(g, sm, &p, &L);
  if (!src) return snprintf(err, errlen, "kernel IR or CUDA C: %s", pc_error(g)), 0;
  if (n_kernels) *n_kernels = p.n_kernels;
  int no_cc = 0;
  pc_emu *e = pc_emu_compile(src, err, errlen, &no_cc);
  free(src);
  if (!e) return no_cc ? -1 : 0;
  unsigned char *ws = calloc(1, (size_t)p.workspace_size + 1), *wt = kir_weights_blob(&p);
  int ok = ws != NULL && pc_emu_run(e, &p, L, NULL, NULL, ins, outs, wt, ws, err, errlen);
  free(ws);
  free(wt);
  pc_emu_close(e);
  return ok;
}
