/* tools/conformance_compiled.c: `primc conformance --compiled`: a node test's model through passes, LLVM and a dlopened library. */
#include "tools/conformance_compiled.h"

#include "codegen/codegen.h"
#include "passes/passes.h"
#include "runtime/primc_rt.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define CC_MAX_DIMS 64
#define CC_MAX_IO 64 /* inputs, and outputs, of a compiled model */

int pc_conf_compiled_flag(int argc, char **argv, int *i, pc_conf_compiled *m) {
  const char *a = argv[*i], *v = *i + 1 < argc ? argv[*i + 1] : NULL;
  if (!strcmp(a, "--compiled")) return m->on = 1;
  if (!strcmp(a, "--unfused")) return m->unfused = 1;
  if (a[0] == '-' && a[1] == 'O' && a[2] >= '0' && a[2] <= '3' && !a[3]) return m->opt_level = a[2] - '0', 1;
  if (!strcmp(a, "--target") && v && (!strcmp(v, "cuda") || !strcmp(v, "cpu"))) return m->cuda = !strcmp(v, "cuda"), ++*i, 1;
  if (!strcmp(a, "--gpu-arch") && v) return m->gpu_arch = v, ++*i, 1;
  if (!strcmp(a, "--triple") && v) return m->triple = v, ++*i, 1;
  if (!strcmp(a, "--runner") && v) return m->runner = v, ++*i, 1;
  return 0;
}

/* fixes every symbolic dim of g's inputs to the size the data set gives it: compiled code has static shapes */
static int bind_dims(const pc_graph *g, const pc_tensor *ins, pc_dim_binding *dims) {
  int n = 0;
  for (int i = 0; i < g->n_inputs; i++) {
    const pc_type *t = &g->inputs[i]->type;
    for (int d = 0; d < t->rank; d++) {
      if (!PC_DIM_IS_SYM(t->dims[d]) || PC_DIM_SYM_ID(t->dims[d]) >= g->n_syms) continue;
      const char *name = g->syms[PC_DIM_SYM_ID(t->dims[d])].name;
      int seen = 0;
      for (int k = 0; k < n && !seen; k++) seen = !strcmp(dims[k].name, name);
      if (!seen && n < CC_MAX_DIMS) dims[n++] = (pc_dim_binding){name, ins[i].dims[d], ins[i].dims[d], 0, 0};
    }
  }
  return n;
}

/* outputs may keep a data-dependent dim (NonZero's count): codegen sizes them at the bound or says why not */
static int inputs_static(const pc_graph *g) {
  for (int i = 0; i < g->n_inputs; i++)
    if (!pc_type_is_static(&g->inputs[i]->type)) return 0;
  return 1;
}

/* the model, imported again for this data set and taken through the pipeline; NULL with err set */
static pc_graph *prepare(const pc_conf_compiled *m, const pc_graph *g, const char *ds, const pc_import_opts *o,
                         const pc_tensor *ins, pc_status *st, char *err, size_t errlen) {
  char model[4096 + 16];
  const char *slash = strrchr(ds, '/');
  snprintf(model, sizeof model, "%.*s/model.onnx", slash ? (int)(slash - ds) : 1, slash ? ds : ".");
  pc_dim_binding dims[CC_MAX_DIMS];
  int n_dims = bind_dims(g, ins, dims);
  for (int i = 0; o && i < o->n_dims && n_dims < CC_MAX_DIMS; i++) dims[n_dims++] = o->dims[i]; /* the runner's own */
  pc_import_opts io = {.dims = dims, .n_dims = n_dims, .gradient = pc_grad_values};
  if (o) io.consts = o->consts, io.n_consts = o->n_consts, io.seqs = o->seqs, io.n_seqs = o->n_seqs;
  pc_graph *c = pc_onnx_load(model, &io);
  if (!c) return *st = PC_ERR_NOMEM, snprintf(err, errlen, "out of memory"), NULL;
  pc_pipeline_opts po = {.opt_level = m->opt_level, .unfused = m->unfused};
  const char *step = "import";
  if (c->status == PC_OK) step = "passes", pc_pipeline_run(c, &po);
  if (c->status == PC_OK && !inputs_static(c)) pc_fail(c, PC_ERR_UNSUPPORTED, "symbolic input dims remain after import");
  if (c->status == PC_OK) return c;
  *st = c->status;
  snprintf(err, errlen, "%s: %s", step, pc_error(c));
  pc_graph_free(c);
  return NULL;
}

/* outs[i]: zeroed buffers of the library's output shapes (a data-dependent dim at its bound) */
static int alloc_outputs(const primc_model_desc *d, pc_tensor *outs, void **ptrs) {
  for (int i = 0; i < d->n_outputs; i++) {
    const primc_tensor_desc *t = &d->outputs[i];
    outs[i] = (pc_tensor){(pc_dtype)t->dtype, t->rank, {0}, NULL};
    memcpy(outs[i].dims, t->dims, sizeof outs[i].dims);
    outs[i].data = calloc(pc_tensor_nbytes(&outs[i]) + 64, 1);
    if (!(ptrs[i] = outs[i].data)) return 0;
  }
  return 1;
}

static int inputs_match(const primc_model_desc *d, const pc_tensor *ins, char *err, size_t errlen) {
  for (int i = 0; i < d->n_inputs; i++) {
    int ok = d->inputs[i].dtype == (int)ins[i].dtype && d->inputs[i].rank == ins[i].rank;
    for (int k = 0; ok && k < ins[i].rank; k++) ok = d->inputs[i].dims[k] == ins[i].dims[k];
    if (!ok) return snprintf(err, errlen, "input %d does not match the compiled signature", i), 0;
  }
  return 1;
}

/* the library's m_model descriptor (the library is never unloaded: its thread pool may still be
 * parked in it); NULL with err set */
static const void *load_model(const char *so, char *err, size_t errlen) {
  void *h = dlopen(so, RTLD_NOW | RTLD_LOCAL);
  if (!h) return snprintf(err, errlen, "dlopen: %s", dlerror()), NULL;
  const void *d = dlsym(h, "m_model");
  if (!d) snprintf(err, errlen, "m_model missing");
  return d;
}

/* the compiled signature d (its counts and tensors) against c and the data set's inputs */
static pc_status signature_ok(const primc_model_desc *d, const pc_graph *c, const pc_tensor *ins, char *err,
                              size_t errlen) {
  if (d->n_inputs != c->n_inputs || d->n_outputs != c->n_outputs)
    return snprintf(err, errlen, "m_model has the wrong number of inputs/outputs"), PC_ERR_INTERNAL;
  if (c->n_inputs > CC_MAX_IO || c->n_outputs > CC_MAX_IO)
    return snprintf(err, errlen, "too many inputs/outputs"), PC_ERR_RANGE;
  return inputs_match(d, ins, err, errlen) ? PC_OK : PC_ERR_SHAPE;
}

/* runs the CPU library once */
static pc_status run_library(const char *so, const pc_graph *c, const pc_tensor *ins, pc_tensor *outs, char *err,
                             size_t errlen) {
  const primc_model_desc *d = load_model(so, err, errlen);
  if (!d) return PC_ERR_IO;
  pc_status st = signature_ok(d, c, ins, err, errlen);
  if (st != PC_OK) return st;
  const void *in[CC_MAX_IO];
  void *out[CC_MAX_IO];
  static const int64_t dummy[8]; /* a non-NULL pointer for empty inputs */
  for (int i = 0; i < c->n_inputs; i++) in[i] = ins[i].data ? ins[i].data : dummy;
  if (!alloc_outputs(d, outs, out)) return snprintf(err, errlen, "out of memory"), PC_ERR_NOMEM;
  void *ws = aligned_alloc(64, (size_t)(d->workspace_size + 127) / 64 * 64);
  if (!ws) return snprintf(err, errlen, "out of memory for the workspace"), PC_ERR_NOMEM;
  int rc = d->run(in, out, ws);
  for (int i = 0; rc == PRIMC_OK && i < c->n_outputs; i++) { /* the actual size of a data-dependent dim */
    int64_t dims[PRIMC_MAX_RANK];
    if ((rc = d->output_dims(ws, i, dims)) == PRIMC_OK) memcpy(outs[i].dims, dims, sizeof dims);
  }
  free(ws);
  if (rc != PRIMC_OK) return snprintf(err, errlen, "m_run or m_output_dims returned %d", rc), PC_ERR_RANGE;
  return PC_OK;
}

/* ---------------------------------------------------------------- an executable for another target */

/* exe (for m->triple) run through m->runner on ins written to dir/inI.npy, its outputs read back from
 * dir/out/outI.npy (their actual dims: a data-dependent dim as the run gives it); the files are removed */
static pc_status run_executable(const pc_conf_compiled *m, pc_graph *c, const char *dir, const char *exe,
                                const pc_tensor *ins, pc_tensor *outs, char *err, size_t errlen) {
  char path[CC_MAX_IO][1100], out_dir[1100], npy_err[256];
  if (c->n_inputs > CC_MAX_IO || c->n_outputs > CC_MAX_IO || c->n_inputs > PC_ARGV_MAX - 8)
    return snprintf(err, errlen, "too many inputs/outputs"), PC_ERR_RANGE;
  pc_argv a = {.n = 0};
  pc_argv_add_words(&a, m->runner);
  pc_argv_add_path(&a, exe);
  pc_status st = PC_OK;
  for (int i = 0; i < c->n_inputs && st == PC_OK; i++) {
    snprintf(path[i], sizeof path[i], "%s/in%d.npy", dir, i);
    primc_array arr = {(primc_dtype)ins[i].dtype, ins[i].rank, {0}, ins[i].data};
    memcpy(arr.dims, ins[i].dims, sizeof arr.dims);
    if (primc_npy_write(path[i], &arr, npy_err, sizeof npy_err) != 0)
      st = PC_ERR_IO, snprintf(err, errlen, "input %d: %s", i, npy_err);
    pc_argv_add_path(&a, path[i]);
  }
  snprintf(out_dir, sizeof out_dir, "%s/out", dir);
  pc_argv_add(&a, "-o");
  pc_argv_add_path(&a, out_dir);
  if (st == PC_OK && pc_argv_run(c, "running the executable", &a) != PC_OK)
    st = c->status, snprintf(err, errlen, "%s", pc_error(c));
  for (int i = 0; i < c->n_outputs; i++) {
    char o[1200];
    snprintf(o, sizeof o, "%s/out%d.npy", out_dir, i);
    primc_array arr = {0};
    if (st == PC_OK && primc_npy_read(o, &arr, npy_err, sizeof npy_err) != 0)
      st = PC_ERR_IO, snprintf(err, errlen, "output %d: %s", i, npy_err);
    else if (st == PC_OK && arr.rank > PC_MAX_RANK)
      st = PC_ERR_RANGE, snprintf(err, errlen, "output %d: rank %d", i, arr.rank), free(arr.data);
    else if (st == PC_OK)
      outs[i] = (pc_tensor){(pc_dtype)arr.dtype, arr.rank, {0}, arr.data}, memcpy(outs[i].dims, arr.dims, sizeof arr.dims);
    unlink(o);
  }
  for (int i = 0; i < c->n_inputs; i++) unlink(path[i]);
  rmdir(out_dir);
  return st;
}

/* ---------------------------------------------------------------- CUDA */

typedef struct cuda_io {
  primc_cuda *cu;
  primc_devptr din[CC_MAX_IO], dout[CC_MAX_IO], ws;
} cuda_io;

static void cuda_release(cuda_io *d, int n_in, int n_out) {
  for (int i = 0; i < n_in; i++) primc_cuda_free(d->cu, d->din[i]);
  for (int i = 0; i < n_out; i++) primc_cuda_free(d->cu, d->dout[i]);
  primc_cuda_free(d->cu, d->ws);
  primc_cuda_close(d->cu);
}

/* inputs uploaded, outputs and workspace allocated; the outputs poisoned so that one no kernel writes shows */
static int cuda_buffers(cuda_io *d, const primc_cuda_model_desc *m, const pc_tensor *ins, const pc_tensor *outs) {
  int st = PRIMC_OK;
  for (int i = 0; st == PRIMC_OK && i < m->n_inputs; i++) {
    size_t n = pc_tensor_nbytes(&ins[i]);
    st = primc_cuda_alloc(d->cu, n, &d->din[i]);
    if (st == PRIMC_OK && n) st = primc_cuda_upload(d->cu, d->din[i], ins[i].data, n);
  }
  for (int i = 0; st == PRIMC_OK && i < m->n_outputs; i++) {
    size_t n = pc_tensor_nbytes(&outs[i]);
    st = primc_cuda_alloc(d->cu, n, &d->dout[i]);
    if (st == PRIMC_OK) st = primc_cuda_memset(d->cu, d->dout[i], 0xff, n);
  }
  if (st == PRIMC_OK) st = primc_cuda_alloc(d->cu, (size_t)m->workspace_size, &d->ws);
  return st;
}

/* the CUDA library's NAME_run on device copies of ins; outs downloaded from the GPU */
static pc_status run_cuda_library(const char *so, const pc_graph *c, const pc_tensor *ins, pc_tensor *outs, char *err,
                                  size_t errlen) {
  const primc_cuda_model_desc *m = load_model(so, err, errlen);
  if (!m) return PC_ERR_IO;
  /* the CPU descriptor's view of the signature, for the shared checks */
  const primc_model_desc shape = {.n_inputs = m->n_inputs, .n_outputs = m->n_outputs, .inputs = m->inputs, .outputs = m->outputs};
  pc_status sig = signature_ok(&shape, c, ins, err, errlen);
  if (sig != PC_OK) return sig;
  void *host[CC_MAX_IO];
  if (!alloc_outputs(&shape, outs, host)) return snprintf(err, errlen, "out of memory"), PC_ERR_NOMEM;
  cuda_io d = {0};
  char cerr[512] = "";
  if (primc_cuda_open(getenv("PRIMC_CUDA_DEVICE") ? atoi(getenv("PRIMC_CUDA_DEVICE")) : 0, &d.cu, cerr, sizeof cerr))
    return snprintf(err, errlen, "no GPU: %s", cerr), PC_ERR_UNSUPPORTED;
  int st = cuda_buffers(&d, m, ins, outs);
  const char *what = primc_cuda_error(d.cu);
  if (st == PRIMC_OK) {
    const void *in[CC_MAX_IO];
    void *out[CC_MAX_IO];
    for (int i = 0; i < m->n_inputs; i++) in[i] = (const void *)(uintptr_t)d.din[i];
    for (int i = 0; i < m->n_outputs; i++) out[i] = (void *)(uintptr_t)d.dout[i];
    st = m->run(in, out, (void *)(uintptr_t)d.ws, NULL); /* its own stream, waited on, data status read */
    what = m->error();
  }
  for (int i = 0; st == PRIMC_OK && i < m->n_outputs; i++)
    if ((st = primc_cuda_download(d.cu, outs[i].data, d.dout[i], pc_tensor_nbytes(&outs[i]))) != PRIMC_OK)
      what = primc_cuda_error(d.cu);
  if (st != PRIMC_OK) snprintf(err, errlen, "GPU run: status %d: %s", st, what);
  cuda_release(&d, m->n_inputs, m->n_outputs);
  return st == PRIMC_OK ? PC_OK : PC_ERR_RANGE;
}

pc_status pc_conf_compiled_run(const pc_conf_compiled *m, const pc_graph *g, const char *ds, const pc_import_opts *o,
                               const pc_tensor *ins, pc_tensor *outs, char *err, size_t errlen) {
  pc_status st = PC_OK;
  pc_graph *c = prepare(m, g, ds, o, ins, &st, err, errlen);
  if (!c) return st;
  const char *tmp = getenv("TMPDIR") && *getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
  char dir[1024], so[1100], hdr[1100];
  snprintf(dir, sizeof dir, "%s/primc-conf-XXXXXX", tmp);
  if (!mkdtemp(dir)) {
    pc_graph_free(c);
    return snprintf(err, errlen, "cannot create a folder in %s", tmp), PC_ERR_IO;
  }
  snprintf(so, sizeof so, "%s/m.%s", dir, m->triple ? "exe" : "so");
  snprintf(hdr, sizeof hdr, "%s/m.h", dir);
  pc_codegen_opts co = {.emit = m->triple ? PC_EMIT_EXE : PC_EMIT_LIB, .output = so, .name = "m",
                        .opt_level = m->opt_level, .target = m->cuda ? PC_TARGET_CUDA : PC_TARGET_CPU,
                        .gpu_arch = m->gpu_arch, .triple = m->triple};
  if (pc_codegen(c, &co) != PC_OK) {
    st = c->status;
    snprintf(err, errlen, "codegen: %s", pc_error(c));
  } else if (m->triple) {
    st = run_executable(m, c, dir, so, ins, outs, err, errlen);
  } else {
    st = m->cuda ? run_cuda_library(so, c, ins, outs, err, errlen) : run_library(so, c, ins, outs, err, errlen);
  }
  unlink(so);
  unlink(hdr);
  rmdir(dir);
  pc_graph_free(c);
  return st;
}
