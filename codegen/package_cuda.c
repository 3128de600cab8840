/* codegen/package_cuda.c: --target cuda packaging: NVRTC cubin + PTX and weights embedded in an object with a C host side, built with the system cc. */
#include "codegen/codegen.h"
#include "codegen/kir.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Why a generated C file and not LLVM: the host side only fills pointer tables and calls the
 * runtime's driver wrappers, so readable C is easier to debug (PRIMC_KEEP_TMP=1 keeps it), and
 * the binaries go in by the assembler's .incbin: no giant initializer for cc to parse. */

typedef struct cuda_pkg {
  pc_graph *g;
  const kir_program *p;
  const pc_cuda_launch *L;
  const pc_codegen_opts *o;
  const kir_cuda_dyn *dyn; /* run-time dims (codegen/cuda_dynamic.c), else NULL */
  const char *arch;
  char name[256];     /* C prefix of the entry points */
  char dir[64];       /* temporary directory: binaries, host C, object */
  size_t cubin_size;  /* 0 for a compute_NN target: PTX only */
  size_t ptx_size;
  const char *weights_of; /* a bucket whose weights are the same bytes: its NAME__bK prefix, else NULL (own) */
  int part;               /* a bucket's program: exports NAME__bK_weights_device for the buckets that share them */
  const kir_cuda_buckets *buckets; /* the dispatcher's header: its buckets, else NULL */
} cuda_pkg;

/* ---------------------------------------------------------------- names and files */

static void tmp_path(const cuda_pkg *k, const char *file, char *out, size_t n) { snprintf(out, n, "%s/%s", k->dir, file); }

static const char *const tmp_files[] = {"cubin", "ptx", "weights", "host.c", "host.o"};

static void remove_tmp(const cuda_pkg *k) {
  if (!k->dir[0] || getenv("PRIMC_KEEP_TMP")) return;
  char path[128];
  for (size_t i = 0; i < sizeof tmp_files / sizeof tmp_files[0]; i++) {
    tmp_path(k, tmp_files[i], path, sizeof path);
    unlink(path);
  }
  rmdir(k->dir);
}

static void tensor_name(const pc_value *v, int i, int input, char *out, size_t n) {
  if (v->name) snprintf(out, n, "%s", v->name);
  else snprintf(out, n, "%s%d", input ? "in" : "out", i);
}

/* ---------------------------------------------------------------- the host C */

/* Declarations copied from runtime/primc_rt.h so that the generated file needs no include path;
 * the unit test reads the compiled descriptor through the real header. */
static const char *const host_decls[] = {
    "#include <pthread.h>",
    "#include <stdint.h>",
    "#include <stdio.h>",
    "#include <stdlib.h>",
    "",
    "typedef struct primc_cuda primc_cuda;",
    "typedef struct primc_cuda_module primc_cuda_module;",
    "typedef uint64_t primc_devptr;",
    "typedef struct primc_tensor_desc { const char *name; int32_t dtype, rank; int64_t dims[8]; } primc_tensor_desc;",
    "typedef struct primc_cuda_model_desc {",
    "  const char *name, *gpu_arch;",
    "  int (*run)(const void *const *, void *const *, void *, void *);",
    "  int (*status)(void);",
    "  const char *(*error)(void);",
    "  int64_t workspace_size, workspace_align;",
    "  int32_t n_inputs, n_outputs;",
    "  const primc_tensor_desc *inputs, *outputs;",
    "  int32_t n_kernels, cuda_graphs;",
    "  const struct primc_dims_desc *dims;",
    "  int (*run_dims)(const void *const *, const int64_t *const *, void *const *, void *, void *);",
    "  int (*output_dims)(const int64_t *const *, int32_t, int64_t *);",
    "} primc_cuda_model_desc;",
    "typedef struct primc_sym_desc { const char *name; int64_t lo, hi, multiple; } primc_sym_desc;",
    "typedef struct primc_dims_desc {",
    "  int32_t n_syms;",
    "  const primc_sym_desc *syms;",
    "  const int32_t *input_syms;",
    "  int64_t offset;",
    "  int32_t n_inputs;",
    "  const primc_tensor_desc *inputs;",
    "} primc_dims_desc;",
    "int primc_dims_check(const primc_dims_desc *d, const int64_t *const *input_dims, int64_t *values, char *msg, size_t len);",
    "int32_t primc_bucket_of(const primc_dims_desc *d, int32_t n, const int64_t *lo, const int64_t *hi, const int64_t *values);",
    "int primc_cuda_open(int ordinal, primc_cuda **out, char *err, size_t errlen);",
    "const char *primc_cuda_error(const primc_cuda *c);",
    "int primc_cuda_alloc(primc_cuda *c, size_t n, primc_devptr *p);",
    "int primc_cuda_upload(primc_cuda *c, primc_devptr dst, const void *src, size_t n);",
    "int primc_cuda_module_load(primc_cuda *c, const void *image, primc_cuda_module **m);",
    "int primc_cuda_function(primc_cuda *c, primc_cuda_module *m, const char *name, void **fn);",
    "int primc_cuda_launch_on(primc_cuda *c, void *stream, void *fn, const char *name, unsigned grid, unsigned block,",
    "                         unsigned shmem, void **args);",
    "int primc_cuda_sync(primc_cuda *c);",
    "int primc_cuda_module_status(primc_cuda *c, primc_cuda_module *m, int *status);",
    "int primc_cuda_main(int argc, char **argv, const primc_cuda_model_desc *m);",
    "",
    "enum { ST_OK = 0, ST_ARG = 1, ST_RUNTIME = 3, ST_CUDA = 6, ST_SHAPE = 7 };",
};

/* the binaries, 64-byte aligned in .rodata under exported names; the PTX NUL-terminated */
static void put_blobs(FILE *f, const cuda_pkg *k) {
  static const char *const blobs[] = {"cubin", "ptx", "weights"};
  fprintf(f, "__asm__(\".section .rodata\\n\"\n");
  for (int i = 0; i < (k->weights_of ? 2 : 3); i++) {
    char path[128];
    tmp_path(k, blobs[i], path, sizeof path);
    fprintf(f, "        \".balign 64\\n.globl %s_%s\\n%s_%s:\\n.incbin \\\"%s\\\"\\n%s\"\n", k->name, blobs[i], k->name,
            blobs[i], path, i == 1 ? ".byte 0\\n" : "");
  }
  fprintf(f, "        \".byte 0\\n.previous\\n\");\n");
  fprintf(f, "extern const unsigned char %s_cubin[], %s_ptx[];\n", k->name, k->name);
  if (!k->weights_of) fprintf(f, "extern const unsigned char %s_weights[];\n", k->name);
}

static void put_tensors(FILE *f, const cuda_pkg *k, int input) {
  const pc_graph *g = k->p->g;
  int n = input ? g->n_inputs : g->n_outputs;
  fprintf(f, "static const primc_tensor_desc %s_%s[%d] = {\n", k->name, input ? "in" : "out", n + 1);
  for (int i = 0; i < n; i++) {
    const pc_value *v = input ? g->inputs[i] : g->outputs[i];
    char nm[256];
    tensor_name(v, i, input, nm, sizeof nm);
    fprintf(f, "  {");
    pc_put_c_string(f, nm);
    fprintf(f, ", %d, %d, {", (int)v->type.dtype, v->type.rank);
    for (int d = 0; d < v->type.rank; d++) fprintf(f, "%s%lld", d ? ", " : "", (long long)v->type.dims[d]);
    fprintf(f, "%s}},\n", v->type.rank ? "" : "0");
  }
  fprintf(f, "  {0, 0, 0, {0}}};\n");
}

/* launch tables: kernel names, grids, blocks, and the buffers each kernel takes */
static int put_kernels(FILE *f, const cuda_pkg *k) {
  const kir_program *p = k->p;
  int nk = p->n_kernels, max_args = 1, at = 0;
  fprintf(f, "#define NK %d\n#define NB %d\n", nk, p->n_bufs);
  fprintf(f, "static const char *const kname[NK + 1] = {");
  for (int i = 0; i < nk; i++) fprintf(f, "\"%s\", ", k->L[i].name);
  fprintf(f, "0};\nstatic const unsigned kgrid[NK + 1] = {");
  for (int i = 0; i < nk; i++) fprintf(f, "%lldu, ", (long long)k->L[i].grid);
  fprintf(f, "0}, kblock[NK + 1] = {");
  for (int i = 0; i < nk; i++) fprintf(f, "%du, ", k->L[i].block);
  fprintf(f, "0};\n/* the arguments of kernel i: kargs[kfirst[i] .. kfirst[i + 1]) */\nstatic const int kfirst[NK + 1] = {");
  for (int i = 0; i < nk; i++) {
    fprintf(f, "%d, ", at);
    at += k->L[i].n_args;
    if (k->L[i].n_args > max_args) max_args = k->L[i].n_args;
  }
  fprintf(f, "%d};\nstatic const int kargs[%d] = {", at, at + 1);
  for (int i = 0; i < nk; i++)
    for (int j = 0; j < k->L[i].n_args; j++) fprintf(f, "%d, ", k->L[i].args[j]);
  fprintf(f, "0};\n#define MAX_ARGS %d\n", max_args);
  /* where buffers live: 0 input, 1 output, 2 weights, 3 workspace (kir_place) */
  fprintf(f, "static const unsigned char bplace[NB + 1] = {");
  for (int b = 0; b < p->n_bufs; b++) fprintf(f, "%d, ", (int)p->bufs[b].place);
  fprintf(f, "0};\nstatic const int bindex[NB + 1] = {");
  for (int b = 0; b < p->n_bufs; b++) fprintf(f, "%d, ", p->bufs[b].index);
  fprintf(f, "0};\nstatic const int64_t boffset[NB + 1] = {");
  for (int b = 0; b < p->n_bufs; b++) fprintf(f, "%lldll, ", (long long)p->bufs[b].offset);
  fprintf(f, "0};\n");
  return KP_INPUT == 0 && KP_OUTPUT == 1 && KP_CONST == 2 && KP_WORKSPACE == 3;
}

/* the ranges and which input dim each symbol is: dims_desc, for primc_dims_check */
static void put_dims_desc(FILE *f, const cuda_pkg *k) {
  const kir_cuda_dyn *d = k->dyn;
  const pc_graph *g = k->p->g;
  int ns = d->n_syms;
  fprintf(f, "static const primc_sym_desc syms[NSYM] = {");
  for (int s = 0; s < ns; s++) {
    fprintf(f, "%s{", s ? ", " : "");
    pc_put_c_string(f, d->name[s]);
    fprintf(f, ", %lldLL, %lldLL, %lldLL}", (long long)d->lo[s], (long long)d->hi[s], (long long)d->mult[s]);
  }
  fprintf(f, "};\nstatic const int32_t in_syms[%d] = {", g->n_inputs * PC_MAX_RANK + 1);
  for (int i = 0; i < g->n_inputs * PC_MAX_RANK; i++) fprintf(f, "%d, ", d->in_sym[i]);
  fprintf(f, "0};\nstatic const primc_dims_desc dims_desc = {NSYM, syms, in_syms, -1, NUM_INPUTS, %s_in};\n", k->name);
}

/* the run-time dims: their values at the bounds (what MODEL_run runs; a dim over its multiple), and with dims
 * their ranges, the inputs' symbols, the grids of a run and the outputs' dims, each as the fitted polynomial of the values s[] */
static void put_dims(FILE *f, const cuda_pkg *k) {
  const kir_cuda_dyn *d = k->dyn;
  const pc_graph *g = k->p->g;
  int ns = d ? d->n_syms : 0;
  fprintf(f, "#define NSYM %d\nstatic const long long sym_hi[NSYM + 1] = {", ns);
  for (int s = 0; s < ns; s++) fprintf(f, "%lldLL, ", (long long)(d->hi[s] / d->mult[s]));
  fprintf(f, "0};\n");
  if (!d) return;
  put_dims_desc(f, k);
  fprintf(f, "static unsigned grid_of(int n, const int64_t *w, const int64_t *per) {\n"
             "  int64_t b = 1;\n"
             "  for (int i = 0; i < n && b > 0 && b <= %d; i++) b *= w[i] > 0 ? (w[i] + per[i] - 1) / per[i] : 0;\n"
             "  return b < 1 ? 1u : b > %d ? %du : (unsigned)b;\n}\n", PC_CUDA_MAX_GRID, PC_CUDA_MAX_GRID, PC_CUDA_MAX_GRID);
  fprintf(f, "static void grids(const int64_t *s, unsigned *g) {\n  for (int k = 0; k < NK; k++) g[k] = kgrid[k];\n");
  for (int i = 0; i < k->p->n_kernels; i++) {
    const pc_cuda_launch *L = &k->L[i];
    int moves = 0;
    for (int w = 0; w < L->n_work; w++) {
      const kir_poly *q = &d->work[i * PC_CUDA_GRID_FACTORS + w];
      for (int t = 1; t < KIR_DYN_TERMS; t++) moves |= q->c[t] != 0;
    }
    if (!L->grid || !moves) continue;
    fprintf(f, "  {\n    const int64_t w[] = {");
    for (int w = 0; w < L->n_work; w++) {
      fprintf(f, "%s", w ? ", " : "");
      kir_poly_put(f, &d->work[i * PC_CUDA_GRID_FACTORS + w], ns, "s[%d]");
    }
    fprintf(f, "}, per[] = {");
    for (int w = 0; w < L->n_work; w++) fprintf(f, "%s%lldLL", w ? ", " : "", (long long)L->per[w]);
    fprintf(f, "};\n    g[%d] = grid_of(%d, w, per);\n  }\n", i, L->n_work);
  }
  fprintf(f, "}\nstatic void out_dims(const int64_t *s, int32_t o, int64_t *d) {\n  (void)s;\n  switch (o) {\n");
  for (int i = 0; i < g->n_outputs; i++) {
    fprintf(f, "  case %d:\n", i);
    for (int r = 0; r < g->outputs[i]->type.rank; r++) {
      fprintf(f, "    d[%d] = ", r);
      kir_poly_put(f, &d->out_dim[i * PC_MAX_RANK + r], ns, "s[%d]");
      fprintf(f, ";\n");
    }
    fprintf(f, "    break;\n");
  }
  fprintf(f, "  }\n}\n");
}

/* load once: context, module (cubin, else PTX), functions, weights */
static const char *const host_load[] = {
    "static primc_cuda *cu;",
    "static primc_cuda_module *mod;",
    "static void *fn[NK + 1];",
    "static primc_devptr wdev;",
    "static int load_status, sync_each;",
    "static char err[768];",
    "static pthread_once_t once = PTHREAD_ONCE_INIT;",
    "",
    "static int failed(int s, const char *kernel) {",
    "  if (kernel) snprintf(err, sizeof err, \"kernel %s: %s\", kernel, primc_cuda_error(cu));",
    "  else snprintf(err, sizeof err, \"%s\", primc_cuda_error(cu));",
    "  return s;",
    "}",
    "",
    "static int load_module(void) {",
    "  char cubin_err[256] = \"no cubin\";",
    "  if (CUBIN_SIZE && primc_cuda_module_load(cu, MODEL_cubin, &mod) == ST_OK) return ST_OK;",
    "  if (CUBIN_SIZE) snprintf(cubin_err, sizeof cubin_err, \"%s\", primc_cuda_error(cu));",
    "  int s = primc_cuda_module_load(cu, MODEL_ptx, &mod);",
    "  if (s) snprintf(err, sizeof err, \"neither the \" GPU_ARCH \" cubin (%s) nor the PTX loads: %s\", cubin_err,",
    "                  primc_cuda_error(cu));",
    "  return s;",
    "}",
};

/* load(), after upload_weights */
static const char *const host_load_fn[] = {
    "static void load(void) {",
    "  const char *dev = getenv(\"PRIMC_CUDA_DEVICE\");",
    "  sync_each = getenv(\"PRIMC_CUDA_SYNC\") && *getenv(\"PRIMC_CUDA_SYNC\") != '0';",
    "  int s = primc_cuda_open(dev ? atoi(dev) : 0, &cu, err, sizeof err);",
    "  if (s == ST_OK && (s = load_module()) != ST_OK) {",
    "    load_status = s;",
    "    return;",
    "  }",
    "  for (int k = 0; s == ST_OK && k < NK; k++)",
    "    if ((s = primc_cuda_function(cu, mod, kname[k], &fn[k])) != ST_OK) failed(s, NULL);",
    "  if (s == ST_OK && WEIGHTS_SIZE) s = upload_weights();",
    "  load_status = s;",
    "}",
    "",
};

/* the weights to the device, once: its own copy, or (a bucket whose weights are another's bytes) that bucket's */
static void put_upload(FILE *f, const cuda_pkg *k) {
  if (!k->weights_of) {
    fprintf(f, "static int upload_weights(void) {\n  int s = primc_cuda_alloc(cu, (size_t)WEIGHTS_SIZE, &wdev);\n"
               "  if (s == ST_OK) s = primc_cuda_upload(cu, wdev, %s_weights, (size_t)WEIGHTS_SIZE);\n"
               "  return s ? failed(s, NULL) : ST_OK;\n}\n\n", k->name);
    return;
  }
  fprintf(f, "int %s_weights_device(primc_devptr *p);\nconst char *%s_error(void);\n", k->weights_of, k->weights_of);
  fprintf(f, "static int upload_weights(void) {\n  int s = %s_weights_device(&wdev);\n"
             "  if (s) snprintf(err, sizeof err, \"the weights, which it shares: %%s\", %s_error());\n  return s;\n}\n\n",
          k->weights_of, k->weights_of);
}

/* a bucket's weights on the device, loaded (with its module) on first use, for the buckets that share them */
static const char *const host_weights_device[] = {
    "int MODEL_weights_device(primc_devptr *p) {",
    "  pthread_once(&once, load);",
    "  *p = wdev;",
    "  return load_status;",
    "}",
    "",
};

/* the entry points; MODEL_ is replaced by the model's prefix */
static const char *const host_run[] = {
    "const char *MODEL_error(void) { return err; }",
    "",
    "int MODEL_status(void) {",
    "  int st = 0, s = cu && mod ? primc_cuda_module_status(cu, mod, &st) : ST_OK;",
    "  if (s) return failed(s, NULL);",
    "  if (st) snprintf(err, sizeof err, \"a kernel found bad data (e.g. an index out of range)\");",
    "  return st;",
    "}",
    "",
    "/* a kernel's error named: its launch, or with PRIMC_CUDA_SYNC=1 a wait after each kernel */",
    "static int after_kernel(int k) {",
    "  int s = primc_cuda_sync(cu), st = 0;",
    "  if (s) return failed(s, kname[k]);",
    "  if ((s = primc_cuda_module_status(cu, mod, &st)) != ST_OK) return failed(s, kname[k]);",
    "  if (st) snprintf(err, sizeof err, \"kernel %s found bad data (e.g. an index out of range)\", kname[k]);",
    "  return st;",
    "}",
    "",
    "static primc_devptr where(int b, const void *const *in, void *const *out, void *ws) {",
    "  switch (bplace[b]) {",
    "  case 0: return (primc_devptr)(uintptr_t)in[bindex[b]];",
    "  case 1: return (primc_devptr)(uintptr_t)out[bindex[b]];",
    "  case 2: return wdev + (primc_devptr)boffset[b];",
    "  default: return (primc_devptr)(uintptr_t)ws + (primc_devptr)boffset[b];",
    "  }",
    "}",
    "",
    "/* the kernels with the run-time dims' values sv (leading every kernel's arguments) and their grids */",
    "static int launch_all(const void *const *inputs, void *const *outputs, void *workspace, void *stream,",
    "                      const long long *sv, const unsigned *grid) {",
    "  if ((NUM_INPUTS && !inputs) || (NUM_OUTPUTS && !outputs) || (WORKSPACE_SIZE && !workspace)) return ST_ARG;",
    "  for (int i = 0; i < NUM_INPUTS; i++)",
    "    if (!inputs[i]) return ST_ARG;",
    "  for (int i = 0; i < NUM_OUTPUTS; i++)",
    "    if (!outputs[i]) return ST_ARG;",
    "  pthread_once(&once, load);",
    "  if (load_status) return load_status;",
    "  primc_devptr ptr[NB + 1];",
    "  for (int b = 0; b < NB; b++) ptr[b] = where(b, inputs, outputs, workspace);",
    "  for (int k = 0; k < NK; k++) {",
    "    if (!grid[k]) continue; /* run by the kernel before it (a conv's epilogue) */",
    "    void *a[MAX_ARGS];",
    "    for (int j = kfirst[k]; j < kfirst[k + 1]; j++)",
    "      a[j - kfirst[k]] = kargs[j] < 0 ? (void *)&sv[-1 - kargs[j]] : (void *)&ptr[kargs[j]];",
    "    int s = primc_cuda_launch_on(cu, stream, fn[k], kname[k], grid[k], kblock[k], 0, a);",
    "    if (s) return failed(s, NULL);",
    "    if (!stream && sync_each && (s = after_kernel(k)) != ST_OK) return s;",
    "  }",
    "  if (stream) return ST_OK;",
    "  int s = primc_cuda_sync(cu);",
    "  if (s) {",
    "    snprintf(err, sizeof err, \"%s (run with PRIMC_CUDA_SYNC=1 to name the kernel)\", primc_cuda_error(cu));",
    "    return s;",
    "  }",
    "  return MODEL_status();",
    "}",
    "",
    "int MODEL_run(const void *const *inputs, void *const *outputs, void *workspace, void *stream) {",
    "  return launch_all(inputs, outputs, workspace, stream, sym_hi, kgrid);",
    "}",
    "",
};

/* run-time dims' entry points: the dims checked, then the grids made for them */
static const char *const host_run_dims[] = {
    "int MODEL_run_dims(const void *const *inputs, const int64_t *const *input_dims, void *const *outputs,",
    "                   void *workspace, void *stream) {",
    "  int64_t v[NSYM];",
    "  long long sv[NSYM];",
    "  unsigned grid[NK + 1];",
    "  int st = primc_dims_check(&dims_desc, input_dims, v, err, sizeof err);",
    "  if (st) return st;",
    "  for (int i = 0; i < NSYM; i++) sv[i] = (long long)v[i];",
    "  grids(v, grid);",
    "  return launch_all(inputs, outputs, workspace, stream, sv, grid);",
    "}",
    "",
    "int MODEL_output_dims(const int64_t *const *input_dims, int32_t output, int64_t *dims) {",
    "  int64_t v[NSYM];",
    "  if (!dims || output < 0 || output >= NUM_OUTPUTS) return ST_ARG;",
    "  int st = primc_dims_check(&dims_desc, input_dims, v, err, sizeof err);",
    "  if (st) return st;",
    "  out_dims(v, output, dims);",
    "  return ST_OK;",
    "}",
    "",
};

/* a line of a template with MODEL_ replaced by the model's prefix */
static void put_line(FILE *f, const char *line, const char *name) {
  for (const char *s = line; *s;) {
    const char *m = strstr(s, "MODEL_");
    if (!m) {
      fputs(s, f);
      break;
    }
    fwrite(s, 1, (size_t)(m - s), f);
    fprintf(f, "%s_", name);
    s = m + 6;
  }
  fputc('\n', f);
}

static void put_lines(FILE *f, const char *const *lines, size_t n, const char *name) {
  for (size_t i = 0; i < n; i++) put_line(f, lines[i], name);
}

static void put_descriptor(FILE *f, const cuda_pkg *k) {
  const pc_graph *g = k->p->g;
  const char *n = k->name;
  fprintf(f, "const primc_cuda_model_desc %s_model = {\"%s\", GPU_ARCH, %s_run, %s_status, %s_error, WORKSPACE_SIZE, 256,\n",
          n, n, n, n, n);
  fprintf(f, "    %d, %d, %s_in, %s_out, NK, %d, ", g->n_inputs, g->n_outputs, n, n, k->o->cuda_graphs ? 1 : 0);
  if (k->dyn) fprintf(f, "&dims_desc, %s_run_dims, %s_output_dims};\n", n, n);
  else fprintf(f, "0, 0, 0};\n");
  fprintf(f, "const int64_t %s_workspace_size = WORKSPACE_SIZE;\n", n);
  fprintf(f, "\n#ifdef PRIMC_MAIN\nint main(int argc, char **argv) { return primc_cuda_main(argc, argv, &%s_model); }\n#endif\n",
          n);
}

static pc_status write_host(const cuda_pkg *k, const char *path) {
  FILE *f = fopen(path, "w");
  if (!f) return pc_fail(k->g, PC_ERR_IO, "cannot write %s", path);
  const kir_program *p = k->p;
  fprintf(f, "/* host side of the CUDA model %s, generated by primc %s: loads the %s cubin (else the PTX) once,\n"
             " * uploads the weights once, launches %d kernels in order on a stream. */\n",
          k->name, PC_VERSION, k->cubin_size ? k->arch : "(no)", p->n_kernels);
  put_lines(f, host_decls, sizeof host_decls / sizeof host_decls[0], k->name);
  fprintf(f, "#define GPU_ARCH \"%s\"\n#define CUBIN_SIZE %zu\n#define WEIGHTS_SIZE %lldll\n", k->arch, k->cubin_size,
          (long long)p->weights_size);
  fprintf(f, "#define WORKSPACE_SIZE %lldll\n#define NUM_INPUTS %d\n#define NUM_OUTPUTS %d\n\n", (long long)p->workspace_size,
          p->g->n_inputs, p->g->n_outputs);
  put_blobs(f, k);
  put_tensors(f, k, 1);
  put_tensors(f, k, 0);
  int ok = put_kernels(f, k);
  put_dims(f, k);
  fputc('\n', f);
  put_lines(f, host_load, sizeof host_load / sizeof host_load[0], k->name);
  put_upload(f, k);
  put_lines(f, host_load_fn, sizeof host_load_fn / sizeof host_load_fn[0], k->name);
  if (k->part) put_lines(f, host_weights_device, sizeof host_weights_device / sizeof host_weights_device[0], k->name);
  put_lines(f, host_run, sizeof host_run / sizeof host_run[0], k->name);
  if (k->dyn) put_lines(f, host_run_dims, sizeof host_run_dims / sizeof host_run_dims[0], k->name);
  put_descriptor(f, k);
  int bad = ferror(f);
  bad |= fclose(f);
  if (!ok) return pc_fail(k->g, PC_ERR_INTERNAL, "kir_place changed: update codegen/package_cuda.c");
  return bad ? pc_fail(k->g, PC_ERR_IO, "cannot write %s", path) : PC_OK;
}

/* ---------------------------------------------------------------- buckets' dispatcher */

/* the dispatcher's entry points: the dims checked against the whole ranges, then bucket k's; MODEL_ is the model's
 * prefix, and bucket k's NAME__bK functions are in the tables before these lines */
static const char *const host_dispatch[] = {
    "static char err[768], berr[1024];",
    "static int last = -1; /* the bucket that ran last, whose error is the model's; -1: the dispatcher's own */",
    "",
    "const char *MODEL_error(void) {",
    "  if (last < 0) return err;",
    "  snprintf(berr, sizeof berr, \"bucket %s: %s\", b_name[last], b_error[last]());",
    "  return berr;",
    "}",
    "",
    "int MODEL_status(void) {",
    "  for (int k = 0; k < NBK; k++) {",
    "    int s = b_status[k]();",
    "    if (s) return last = k, s;",
    "  }",
    "  return ST_OK;",
    "}",
    "",
    "static int pick(const int64_t *const *input_dims, int64_t *v) {",
    "  int st = primc_dims_check(&dims_desc, input_dims, v, err, sizeof err);",
    "  if (st) return last = -1, -st;",
    "  int k = primc_bucket_of(&dims_desc, NBK, b_lo, b_hi, v);",
    "  return k < 0 ? (last = -1, -ST_ARG) : k;",
    "}",
    "",
    "int MODEL_run_dims(const void *const *inputs, const int64_t *const *input_dims, void *const *outputs,",
    "                   void *workspace, void *stream) {",
    "  int64_t v[NSYM];",
    "  int k = pick(input_dims, v);",
    "  if (k < 0) return -k;",
    "  last = k;",
    "  return b_run_dims[k](inputs, input_dims, outputs, workspace, stream);",
    "}",
    "",
    "int MODEL_run(const void *const *inputs, void *const *outputs, void *workspace, void *stream) {",
    "  return MODEL_run_dims(inputs, 0, outputs, workspace, stream);",
    "}",
    "",
    "int MODEL_output_dims(const int64_t *const *input_dims, int32_t output, int64_t *dims) {",
    "  int64_t v[NSYM];",
    "  if (!dims || output < 0 || output >= NUM_OUTPUTS) return ST_ARG;",
    "  int k = pick(input_dims, v);",
    "  return k < 0 ? -k : b_output_dims[k](input_dims, output, dims);",
    "}",
    "",
};

/* bucket k's functions, by kind, as a table of the dispatcher's host C */
static void put_bucket_table(FILE *f, const char *name, int n, const char *type, const char *fn, const char *params) {
  for (int k = 0; k < n; k++) fprintf(f, "%s %s__b%d_%s(%s);\n", type, name, k, fn, params);
  fprintf(f, "static %s (*const b_%s[NBK])(%s) = {", type, fn, params);
  for (int k = 0; k < n; k++) fprintf(f, "%s%s__b%d_%s", k ? ", " : "", name, k, fn);
  fprintf(f, "};\n");
}

static pc_status write_dispatcher(const cuda_pkg *k, const kir_cuda_buckets *b, const char *path) {
  FILE *f = fopen(path, "w");
  if (!f) return pc_fail(k->g, PC_ERR_IO, "cannot write %s", path);
  const pc_graph *g = k->p->g;
  fprintf(f, "/* host side of the CUDA model %s, generated by primc %s: %d buckets, each its own module and\n"
             " * entry points %s__bK; runs the bucket whose range holds the value. */\n",
          k->name, PC_VERSION, b->n, k->name);
  put_lines(f, host_decls, sizeof host_decls / sizeof host_decls[0], k->name);
  fprintf(f, "#define GPU_ARCH \"%s\"\n#define WORKSPACE_SIZE %lldll\n#define NUM_INPUTS %d\n#define NUM_OUTPUTS %d\n",
          k->arch, (long long)b->workspace_size, g->n_inputs, g->n_outputs);
  int S = b->full->n_syms;
  fprintf(f, "#define NSYM %d\n#define NBK %d\n", S, b->n);
  for (int hi = 0; hi < 2; hi++) { /* each bucket's box, dims of every symbol (primc_bucket_of) */
    fprintf(f, "static const int64_t b_%s[NBK * NSYM] = {", hi ? "hi" : "lo");
    for (int i = 0; i < b->n * S; i++)
      fprintf(f, "%s%lldLL", i ? ", " : "", (long long)(hi ? b->b[i / S].hi[i % S] : b->b[i / S].lo[i % S]));
    fprintf(f, "};\n");
  }
  fprintf(f, "static const char *const b_name[NBK] = {");
  for (int i = 0; i < b->n; i++) {
    char range[600];
    kir_bucket_label(range, sizeof range, k->o->dyn, &b->b[i], ", ");
    fprintf(f, "%s", i ? ", " : "");
    pc_put_c_string(f, range);
  }
  fprintf(f, "};\n");
  put_bucket_table(f, k->name, b->n, "int", "run_dims",
                   "const void *const *, const int64_t *const *, void *const *, void *, void *");
  put_bucket_table(f, k->name, b->n, "int", "output_dims", "const int64_t *const *, int32_t, int64_t *");
  put_bucket_table(f, k->name, b->n, "int", "status", "void");
  put_bucket_table(f, k->name, b->n, "const char *", "error", "void");
  put_tensors(f, k, 1);
  put_tensors(f, k, 0);
  put_dims_desc(f, k);
  fputc('\n', f);
  put_lines(f, host_dispatch, sizeof host_dispatch / sizeof host_dispatch[0], k->name);
  const char *n = k->name;
  fprintf(f, "const primc_cuda_model_desc %s_model = {\"%s\", GPU_ARCH, %s_run, %s_status, %s_error, WORKSPACE_SIZE, 256,\n",
          n, n, n, n, n);
  fprintf(f, "    %d, %d, %s_in, %s_out, %d, %d, &dims_desc, %s_run_dims, %s_output_dims};\n", g->n_inputs, g->n_outputs,
          n, n, b->n_kernels, k->o->cuda_graphs ? 1 : 0, n, n);
  fprintf(f, "const int64_t %s_workspace_size = WORKSPACE_SIZE;\n", n);
  fprintf(f, "\n#ifdef PRIMC_MAIN\nint main(int argc, char **argv) { return primc_cuda_main(argc, argv, &%s_model); }\n#endif\n",
          n);
  int bad = ferror(f);
  bad |= fclose(f);
  return bad ? pc_fail(k->g, PC_ERR_IO, "cannot write %s", path) : PC_OK;
}

/* ---------------------------------------------------------------- the header */

static void header_tensor(FILE *f, const char *name, int input, int i, const pc_value *v) {
  const char *W = input ? "INPUT" : "OUTPUT";
  char nm[256];
  tensor_name(v, i, input, nm, sizeof nm);
  int64_t n = pc_type_numel(&v->type);
  fprintf(f, "\n/* %s %d: ", input ? "input" : "output", i);
  pc_put_c_string(f, nm);
  fprintf(f, " %s[", pc_dtype_name(v->type.dtype));
  for (int d = 0; d < v->type.rank; d++) fprintf(f, "%s%lld", d ? "," : "", (long long)v->type.dims[d]);
  fprintf(f, "] */\n#define %s_%s%d_NAME ", name, W, i);
  pc_put_c_string(f, nm);
  fprintf(f, "\n#define %s_%s%d_DTYPE %d /* a primc_dtype of runtime/primc_rt.h: %s */\n", name, W, i,
          (int)v->type.dtype, pc_dtype_name(v->type.dtype));
  fprintf(f, "#define %s_%s%d_RANK %d\n#define %s_%s%d_SHAPE {", name, W, i, v->type.rank, name, W, i);
  for (int d = 0; d < v->type.rank; d++) fprintf(f, "%s%lld", d ? ", " : "", (long long)v->type.dims[d]);
  fprintf(f, "%s}\n#define %s_%s%d_NUMEL %lldLL\n", v->type.rank ? "" : "1", name, W, i, (long long)n);
  fprintf(f, "#define %s_%s%d_BYTES %lldLL\n", name, W, i, (long long)(n * (int64_t)pc_dtype_size(v->type.dtype)));
}

static pc_status write_header(const cuda_pkg *k, const char *path) {
  FILE *f = fopen(path, "w");
  pc_graph *g = k->g;
  const char *n = k->name;
  if (!f) return pc_fail(g, PC_ERR_IO, "cannot write %s", path);
  fprintf(f, "/* %s.h: entry points of the model compiled by primc %s for target cuda (%s cubin + PTX for newer\n"
             " * GPUs); link %s.o with libprimc_rt.a -ldl -lpthread. Needs the NVIDIA driver (libcuda.so.1) at run time. */\n",
          n, PC_VERSION, k->cubin_size || k->buckets ? k->arch : "no", n);
  fprintf(f, "#ifndef %s_PRIMC_H\n#define %s_PRIMC_H\n\n#include <stdint.h>\n\n#ifdef __cplusplus\nextern \"C\" {\n#endif\n\n", n, n);
  fprintf(f, "#define %s_TARGET \"cuda\"\n#define %s_GPU_ARCH \"%s\"\n", n, n, k->arch);
  fprintf(f, "/* bytes of device memory %s_run needs as its workspace, and their alignment */\n", n);
  fprintf(f, "#define %s_WORKSPACE_SIZE %lldLL\n#define %s_WORKSPACE_ALIGN 256\n", n, (long long)k->p->workspace_size, n);
  fprintf(f, "#define %s_NUM_INPUTS %d\n#define %s_NUM_OUTPUTS %d\n#define %s_NUM_KERNELS %d\n", n, g->n_inputs, n,
          g->n_outputs, n, k->p->n_kernels);
  fprintf(f, "#define %s_WEIGHTS_SIZE %lldLL /* in the object, uploaded to the device by the first run */\n", n,
          (long long)k->p->weights_size);
  const kir_cuda_dyn *d = k->dyn;
  if (d) {
    fprintf(f, "\n/* run-time dims (--dim NAME=LO..HI): %s_run_dims takes every value in range (with MULTIPLE > 1,\n"
               " * every multiple of it); the inputs' SHAPE,\n"
               " * NUMEL and BYTES, the outputs' and the workspace size hold the bounds (HI) */\n#define %s_NUM_DIMS %d\n",
            n, n, d->n_syms);
    for (int s = 0; s < d->n_syms; s++) {
      fprintf(f, "#define %s_DIM%d_NAME ", n, s);
      pc_put_c_string(f, d->name[s]);
      fprintf(f, "\n#define %s_DIM%d_MIN %lldLL\n#define %s_DIM%d_MAX %lldLL\n#define %s_DIM%d_MULTIPLE %lldLL\n", n, s,
              (long long)d->lo[s], n, s, (long long)d->hi[s], n, s, (long long)d->mult[s]);
    }
    for (int i = 0; i < g->n_inputs; i++) {
      fprintf(f, "#define %s_INPUT%d_DIM_SYMS {", n, i);
      for (int r = 0; r < g->inputs[i]->type.rank; r++) fprintf(f, "%s%d", r ? ", " : "", d->in_sym[i * PC_MAX_RANK + r]);
      fprintf(f, "%s} /* the run-time dim (NAME_DIMk) each dim is, -1 when fixed */\n", g->inputs[i]->type.rank ? "" : "-1");
    }
  }
  if (k->buckets) fputs(k->buckets->note, f);
  for (int i = 0; i < g->n_inputs; i++) header_tensor(f, n, 1, i, g->inputs[i]);
  for (int i = 0; i < g->n_outputs; i++) header_tensor(f, n, 0, i, g->outputs[i]);
  fprintf(f, "\n/* Runs the model on the GPU (device 0, or $PRIMC_CUDA_DEVICE; its primary context).\n"
             " * inputs[i] / outputs[i]: DEVICE pointers (CUdeviceptr cast to void *) to row-major buffers of\n"
             " * the shapes above; workspace: %s_WORKSPACE_SIZE bytes of device memory (NULL when 0), not\n"
             " * shared by concurrent calls. stream: a CUDA stream (CUstream or cudaStream_t cast to void *) to\n"
             " * enqueue the kernels on and return at once (CUDA graph capture works: call once before capturing);\n"
             " * NULL: the model's own stream, and the call returns when the kernels are done.\n"
             " * The first call loads the module (the cubin, else the PTX) and uploads the weights.\n"
             " * Returns 0, 1 (a NULL pointer), 3 (bad data, e.g. an index out of range), 5 (no CUDA device),\n"
             " * 6 (a CUDA call failed: %s_error() names it and the kernel). */\n", n, n);
  fprintf(f, "int %s_run(const void *const *inputs, void *const *outputs, void *workspace, void *stream);\n", n);
  if (d) {
    fprintf(f, "/* %s_run with each input's actual dims (input_dims[i]: input i's rank dims; NULL, or a NULL entry: the\n"
               " * bounds): the dims are checked before any launch (7, with %s_error() naming the input, the dim, the value\n"
               " * and the range), then the kernels run with the dims as arguments and their grids sized for them.\n"
               " * Buffers are read and written row-major in the actual dims. */\n", n, n);
    fprintf(f, "int %s_run_dims(const void *const *inputs, const int64_t *const *input_dims, void *const *outputs,\n"
               "                void *workspace, void *stream);\n", n);
    fprintf(f, "/* the dims of output `output` of a run with those input dims: 0, 1 (no such output), 7 (out of range) */\n");
    fprintf(f, "int %s_output_dims(const int64_t *const *input_dims, int32_t output, int64_t *dims);\n", n);
  }
  fprintf(f, "/* after the stream passed to %s_run is idle: 3 when a kernel found bad data, then cleared */\n", n);
  fprintf(f, "int %s_status(void);\n/* the last failure in words (driver call, CUDA status, kernel) */\n", n);
  fprintf(f, "const char *%s_error(void);\nextern const int64_t %s_workspace_size;\n", n, n);
  fprintf(f, "/* the model's descriptor: a primc_cuda_model_desc of runtime/primc_rt.h */\nextern const struct primc_cuda_model_desc %s_model;\n",
          n);
  if (!k->buckets) { /* each bucket has its own, as NAME__bK_cubin and NAME__bK_ptx */
    fprintf(f, "/* the embedded binaries: %s_cubin (ELF), %s_ptx (NUL-terminated text) */\n", n, n);
    fprintf(f, "extern const unsigned char %s_cubin[], %s_ptx[];\n", n, n);
  }
  fprintf(f, "\n#ifdef __cplusplus\n}\n#endif\n#endif\n");
  int bad = ferror(f);
  bad |= fclose(f);
  return bad ? pc_fail(g, PC_ERR_IO, "cannot write %s", path) : PC_OK;
}

/* ---------------------------------------------------------------- building */

/* objects linked with the runtime into out: an executable, a shared library (KIR_LINK_*), or joined into one object */
static pc_status link_objects(pc_graph *g, const pc_codegen_opts *o, const char *out, const char *const *objs, int n,
                              kir_link_kind kind) {
  const char *cc = getenv("CC") && *getenv("CC") ? getenv("CC") : "cc";
  char dir[2048], rt[2100];
  pc_runtime_dir(o, dir, sizeof dir);
  snprintf(rt, sizeof rt, "%s/libprimc_rt.a", dir);
  pc_argv l = {.n = 0};
  pc_argv_add_words(&l, cc);
  if (kind == KIR_LINK_SHARED) pc_argv_add(&l, "-shared");
  if (kind == KIR_LINK_OBJECT) pc_argv_add(&l, "-r"), pc_argv_add(&l, "-nostdlib");
  pc_argv_add_words(&l, getenv("PRIMC_LDFLAGS")); /* as package.c: e.g. a sanitizer */
  pc_argv_add(&l, "-o");
  pc_argv_add_path(&l, out);
  for (int i = 0; i < n; i++) pc_argv_add_path(&l, objs[i]);
  const char *tail[] = {rt, "-ldl", "-lpthread", "-lm"};
  for (size_t i = 0; kind != KIR_LINK_OBJECT && i < sizeof tail / sizeof *tail; i++) pc_argv_add(&l, tail[i]);
  return pc_argv_run(g, kind == KIR_LINK_OBJECT ? "joining the objects" : "linking", &l);
}

/* host C (the file host.c of dir) -> object host.o (with main when main), or obj_out */
static pc_status compile_host(pc_graph *g, const char *dir, int main, const char *obj_out) {
  const char *cc = getenv("CC") && *getenv("CC") ? getenv("CC") : "cc";
  char host[128], obj[128];
  snprintf(host, sizeof host, "%s/host.c", dir);
  snprintf(obj, sizeof obj, "%s/host.o", dir);
  pc_argv a = {.n = 0};
  pc_argv_add_words(&a, cc);
  const char *flags[] = {"-std=gnu11", "-O2", "-fPIC", "-c", host, "-o"};
  for (size_t i = 0; i < sizeof flags / sizeof *flags; i++) pc_argv_add(&a, flags[i]);
  pc_argv_add_path(&a, obj_out ? obj_out : obj);
  if (main) pc_argv_add(&a, "-DPRIMC_MAIN");
  return pc_argv_run(g, "compiling the host side", &a);
}

/* host C -> object (with main for an executable), then the link */
static pc_status build(const cuda_pkg *k, const char *obj_out) {
  const pc_codegen_opts *o = k->o;
  int exe = o->emit == PC_EMIT_EXE, lib = o->emit == PC_EMIT_LIB;
  pc_status s = compile_host(k->g, k->dir, exe, exe || lib ? NULL : obj_out);
  if (s != PC_OK || !(exe || lib)) return s;
  char obj[128];
  tmp_path(k, "host.o", obj, sizeof obj);
  const char *objs[1] = {obj};
  return link_objects(k->g, o, o->output, objs, 1, lib ? KIR_LINK_SHARED : KIR_LINK_EXE);
}

static pc_status write_blobs(cuda_pkg *k, const pc_cuda_binary *b, const void *weights) {
  char path[128];
  tmp_path(k, "cubin", path, sizeof path);
  pc_status s = pc_file_write(k->g, path, b->cubin, b->cubin_size);
  tmp_path(k, "ptx", path, sizeof path);
  if (s == PC_OK) s = pc_file_write(k->g, path, b->ptx, b->ptx_size);
  tmp_path(k, "weights", path, sizeof path);
  if (s == PC_OK && !k->weights_of) s = pc_file_write(k->g, path, weights, (size_t)k->p->weights_size);
  k->cubin_size = b->cubin_size;
  k->ptx_size = b->ptx_size;
  return s;
}

/* the rendered program through NVRTC, then the files; part_obj: only the object there (a bucket's) */
static pc_status package(cuda_pkg *k, const char *src, const void *weights, const char *part_obj) {
  pc_graph *g = k->g;
  char err[512], path[1100], stem[1024];
  pc_nvrtc *nv = pc_nvrtc_open(err, sizeof err);
  if (!nv) return pc_fail(g, PC_ERR_UNSUPPORTED, "--target cuda: %s", err);
  pc_cuda_binary b;
  pc_status s = pc_nvrtc_compile(g, nv, src, k->arch, &b);
  pc_nvrtc_close(nv);
  if (s != PC_OK) return pc_cuda_binary_free(&b), s;
  snprintf(k->dir, sizeof k->dir, "/tmp/primc-cuda-XXXXXX");
  if (!mkdtemp(k->dir)) {
    k->dir[0] = 0;
    pc_cuda_binary_free(&b);
    return pc_fail(g, PC_ERR_IO, "cannot make a temporary directory");
  }
  s = write_blobs(k, &b, weights);
  pc_cuda_binary_free(&b);
  tmp_path(k, "host.c", path, sizeof path);
  if (s == PC_OK) s = write_host(k, path);
  if (part_obj) return s == PC_OK ? compile_host(g, k->dir, 0, part_obj) : s;
  pc_path_stem(k->o->output, stem, sizeof stem);
  snprintf(path, sizeof path, "%s.o", stem);
  if (s == PC_OK) s = build(k, path);
  snprintf(path, sizeof path, "%s.h", stem);
  if (s == PC_OK && k->o->emit != PC_EMIT_EXE) s = write_header(k, path);
  return s;
}

static const char *arch_of(const pc_codegen_opts *o) { return o->gpu_arch && *o->gpu_arch ? o->gpu_arch : "sm_90"; }

pc_status kir_cuda_part(pc_graph *g, const pc_codegen_opts *o, const kir_program *p, const char *src,
                        const pc_cuda_launch *L, const kir_cuda_dyn *d, const char *name, const char *obj,
                        const void *weights, const char *weights_of) {
  cuda_pkg k = {g, p, L, o, d, arch_of(o), "", "", 0, 0, weights_of, 1, NULL};
  snprintf(k.name, sizeof k.name, "%s", name);
  pc_status s = package(&k, src, weights, obj);
  remove_tmp(&k);
  return s;
}

static pc_status check_opts(pc_graph *g, const pc_codegen_opts *o) {
  if (o->emit != PC_EMIT_EXE && o->emit != PC_EMIT_OBJ && o->emit != PC_EMIT_LIB)
    return pc_fail(g, PC_ERR_UNSUPPORTED, "--target cuda writes exe, obj or lib (--emit cuda writes the CUDA C)");
  if (o->weights_external)
    return pc_fail(g, PC_ERR_UNSUPPORTED, "--target cuda keeps the weights in the object (--weights external is CPU only)");
  if (o->profile) return pc_fail(g, PC_ERR_UNSUPPORTED, "--profile is CPU only for now");
  return PC_OK;
}

pc_status pc_codegen_cuda_package(pc_graph *g, const pc_codegen_opts *opts) {
  if (!opts || !opts->output) return pc_fail(g, PC_ERR_ATTR, "codegen: no output path");
  pc_status s = check_opts(g, opts);
  if (s != PC_OK) return s;
  if (pc_dyn_bucketed(opts->dyn)) return kir_cuda_buckets_package(g, opts); /* codegen/cuda_buckets.c */
  kir_program p;
  cuda_pkg k = {g, &p, NULL, opts, NULL, arch_of(opts), "", "", 0, 0, NULL, 0, NULL};
  if (opts->name) snprintf(k.name, sizeof k.name, "%s", opts->name);
  else pc_path_ident(opts->output, k.name, PC_MAX_ENTRY_NAME + 1);
  char *src = NULL;
  pc_cuda_launch *L = NULL;
  kir_cuda_dyn *d = NULL;
  s = kir_cuda_program(g, opts, &p, &src, &L, &d);
  k.dyn = d;
  k.L = L;
  void *blob = s == PC_OK ? kir_weights_blob(&p) : NULL;
  if (s == PC_OK && !blob) s = pc_fail(g, PC_ERR_NOMEM, "out of memory for the weights");
  if (s == PC_OK) s = package(&k, src, blob, NULL);
  remove_tmp(&k);
  free(blob);
  free(src);
  return s;
}

/* the buckets' dispatcher (codegen/cuda_buckets.c), linked with their objects */
pc_status kir_cuda_dispatch(pc_graph *g, const pc_codegen_opts *o, const kir_cuda_buckets *b) {
  kir_program h = *b->top; /* the header's sizes: the largest bucket's */
  h.workspace_size = b->workspace_size, h.weights_size = b->weights_size, h.n_kernels = b->n_kernels;
  cuda_pkg k = {g, &h, NULL, o, b->full, arch_of(o), "", "", 0, 0, NULL, 0, b};
  char path[1100], stem[1024], obj[128];
  kir_output_names(o, k.name, sizeof k.name, stem, sizeof stem);
  snprintf(k.dir, sizeof k.dir, "/tmp/primc-cuda-XXXXXX");
  if (!mkdtemp(k.dir)) return k.dir[0] = 0, pc_fail(g, PC_ERR_IO, "cannot make a temporary directory");
  tmp_path(&k, "host.c", path, sizeof path);
  tmp_path(&k, "host.o", obj, sizeof obj);
  int exe = o->emit == PC_EMIT_EXE, lib = o->emit == PC_EMIT_LIB;
  pc_status s = write_dispatcher(&k, b, path);
  if (s == PC_OK) s = compile_host(g, k.dir, exe, NULL);
  const char **objs = calloc((size_t)b->n + 2, sizeof *objs);
  if (s == PC_OK && !objs) s = pc_fail(g, PC_ERR_NOMEM, "out of memory");
  for (int i = 0; objs && i < b->n; i++) objs[i + 1] = b->objs[i];
  if (objs) objs[0] = obj;
  snprintf(path, sizeof path, "%s.o", stem);
  if (s == PC_OK)
    s = link_objects(g, o, exe || lib ? o->output : path, objs, b->n + 1,
                     exe ? KIR_LINK_EXE : lib ? KIR_LINK_SHARED : KIR_LINK_OBJECT);
  free(objs);
  snprintf(path, sizeof path, "%s.h", stem);
  if (s == PC_OK && !exe) s = write_header(&k, path);
  remove_tmp(&k);
  return s;
}

/* ---------------------------------------------------------------- batched NVRTC checks */

/* the kernels of a rendered program: everything from the first kernel's comment on */
static const char *kernels_of(const char *src) {
  const char *k = strstr(src, "\n/* k0_");
  return k ? k : src + strlen(src);
}

/* renders gs[i]; NULL with res[i] set when it cannot be rendered */
static char *render_one(pc_graph *g, const char *arch, pc_status *res) {
  kir_program p;
  char *src = NULL;
  size_t len;
  if (g->status) return *res = g->status, NULL;
  *res = kir_cuda_render(g, arch, 0, &p, &src, &len, NULL);
  return src;
}

/* the prelude once, then each program's kernels in a namespace of its own, without extern "C"
 * so that the same kernel names in two programs do not clash */
static char *batch_source(char **srcs, int n) {
  char *out = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&out, &len);
  if (!f) return NULL;
  int first = 1;
  for (int i = 0; i < n; i++) {
    if (!srcs[i]) continue;
    const char *k = kernels_of(srcs[i]);
    if (first) fwrite(srcs[i], 1, (size_t)(k - srcs[i]), f);
    first = 0;
    fprintf(f, "\nnamespace primc_batch%d {\n", i);
    for (const char *s = k; *s;) {
      const char *e = strstr(s, "extern \"C\" ");
      if (!e) {
        fputs(s, f);
        break;
      }
      fwrite(s, 1, (size_t)(e - s), f);
      s = e + strlen("extern \"C\" ");
    }
    fprintf(f, "\n}\n");
  }
  fclose(f);
  return out;
}

void pc_cuda_check_many(pc_graph *const *gs, int n, pc_nvrtc *nv, const char *arch, pc_status *res) {
  char **srcs = calloc((size_t)n + 1, sizeof *srcs);
  int live = 0;
  for (int i = 0; i < n; i++) {
    res[i] = PC_OK;
    if (srcs) srcs[i] = render_one(gs[i], arch, &res[i]);
    if (!srcs) res[i] = pc_fail(gs[i], PC_ERR_NOMEM, "out of memory");
    live += srcs && srcs[i];
  }
  if (!live) return free(srcs);
  char *batch = live > 1 ? batch_source(srcs, n) : NULL;
  pc_graph *scratch = batch ? pc_graph_new() : NULL;
  pc_cuda_binary b;
  int batch_ok = scratch && pc_nvrtc_compile(scratch, nv, batch, arch, &b) == PC_OK;
  if (scratch) pc_cuda_binary_free(&b);
  /* one by one when the batch failed, so that the error lands on its own graph */
  for (int i = 0; i < n; i++) {
    if (!srcs[i]) continue;
    if (!batch_ok) {
      res[i] = pc_nvrtc_compile(gs[i], nv, srcs[i], arch, &b);
      pc_cuda_binary_free(&b);
    }
    free(srcs[i]);
  }
  pc_graph_free(scratch);
  free(batch);
  free(srcs);
}
