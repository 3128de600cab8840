/* tools/conformance.c: `primc conformance`: runs the ONNX backend node tests through the importer and the interpreter. */
#include "frontend/frontend.h"
#include "frontend/onnx_internal.h"
#include "ir/ir.h"
#include "passes/passes.h"
#include "tools/cmds.h"
#include "tools/conformance_compiled.h"

#include <dirent.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define CF_RTOL 1e-3 /* onnx.backend.test runner defaults */
#define CF_ATOL 1e-7
#define CF_RTOL_BF16 0.015625 /* onnx's runner: two bfloat16 ULPs (2^-6) for bfloat16 outputs */
#define CF_TIMEOUT_S 60
#define CF_MAX_IO 64
#define CF_MAX_SPECIALIZE 16 /* elements of an input the runner may fix at compile time */

static const char *conf_help =
    "usage: primc conformance [--dir D] [--filter S] [--list-failures] [--expected FILE]\n"
    "  Imports every ONNX node test under D (folders with model.onnx and test_data_set_*),\n"
    "  runs it with the reference interpreter and compares with the expected outputs\n"
    "  (rtol 1e-3, 2^-6 for bfloat16 outputs, atol 1e-7, as onnx's backend runner; NaN equals\n"
    "  NaN, exact for ints and bools). Sequence and optional inputs and outputs (SequenceProto,\n"
    "  OptionalProto data) are fed and compared element by element as NAME.0, NAME.1...; a\n"
    "  sequence input's length and element types are fixed per data set, which prints as\n"
    "  \"NAME (list)\" among the specialized inputs.\n"
    "  A model an op of which needs a graph input at compile time (axes, pads...) is retried\n"
    "  with those inputs fixed to each data set's values when they are int32/int64, float or\n"
    "  bool of at most 16 elements; such a pass prints as \"PASS name (specialized: inputs)\"\n"
    "  and is counted apart in the summary.\n"
    "  --dir D            test folder (default: $ONNX_NODE_DIR, else build/onnx-node-tests;\n"
    "                     tests/ref/gen_onnx_node_tests.py D writes the tests)\n"
    "  --filter S         only tests whose name contains S\n"
    "  --list-failures    print only FAIL and UNSUPPORTED lines and the summary\n"
    "  --expected FILE    exit 1 when a test listed in FILE (one name a line) does not pass\n"
    "  --compiled [-O0..-O3] [--unfused]  compile each test (passes, LLVM, a shared library) and\n"
    "                     run that instead of the interpreter (default -O2)\n"
    "  --triple T [--runner CMD]  with --compiled: an executable for target T (linked against\n"
    "                     the runtime built for it) run through CMD (e.g. qemu-aarch64) on .npy files\n"
    "  --target cuda [--gpu-arch A]  with --compiled: NVRTC-compile the kernels for A (default\n"
    "                     sm_90) and run them on the GPU ($PRIMC_CUDA_DEVICE, else device 0)\n";

typedef enum { CF_PASS, CF_FAIL, CF_UNSUPPORTED } cf_result;
static const char *const cf_names[] = {"PASS", "FAIL", "UNSUPPORTED"};
static pc_conf_compiled cf_compiled = {.opt_level = 2}; /* --compiled: run compiled code, not the interpreter */

typedef struct cf_test {
  char *name;
  char op[64];
  cf_result res;
} cf_test;

/* ---------------------------------------------------------------- files */

static unsigned char *read_file(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  unsigned char *buf = NULL;
  size_t cap = 0, n = 0;
  for (;;) {
    if (n == cap) {
      unsigned char *nb = realloc(buf, cap = cap ? cap * 2 : 4096);
      if (!nb) break;
      buf = nb;
    }
    size_t r = fread(buf + n, 1, cap - n, f);
    if (r == 0) break;
    n += r;
  }
  fclose(f);
  *len = n;
  return buf;
}

static int is_file(const char *p) {
  struct stat st;
  return stat(p, &st) == 0 && S_ISREG(st.st_mode);
}

/* the importer's check of wire data before protobuf-c unpacks it, whose unpack recurses once per nested
 * message (a TensorProto cannot nest: its files need no check) */
static int wire_ok(const unsigned char *buf, size_t len, const ProtobufCMessageDescriptor *d, char *why, size_t cap) {
  return ox_wire_check(buf, len, d, OX_MAX_MSG_DEPTH, why, cap) == PC_OK;
}

/* reads one TensorProto .pb with the importer's decoder; message in err on failure */
static int load_pb(const char *path, pc_tensor *t, char **tname, char *err, size_t errlen) {
  size_t len;
  unsigned char *buf = read_file(path, &len);
  if (!buf) return snprintf(err, errlen, "cannot read %s", path), 0;
  Onnx__TensorProto *tp = onnx__tensor_proto__unpack(NULL, len, buf);
  free(buf);
  if (!tp) return snprintf(err, errlen, "%s: not a TensorProto", path), 0;
  pc_graph *scratch = pc_graph_new();
  int ok = scratch && ox_tensor_decode(scratch, tp, NULL, t) == PC_OK;
  if (!ok) snprintf(err, errlen, "%s", scratch ? pc_error(scratch) : "out of memory");
  *tname = tp->name ? strdup(tp->name) : NULL;
  pc_graph_free(scratch);
  onnx__tensor_proto__free_unpacked(tp, NULL);
  return ok;
}

static void free_tensor_list(pc_tensor *t, int n) {
  for (int i = 0; i < n; i++) pc_tensor_free(&t[i]);
}

/* ---------------------------------------------------------------- sequences and optionals
 * SequenceProto and OptionalProto (onnx-data.proto, not compiled here) share their field numbers:
 * 3 holds tensors, 5 sequences; the runner walks their wire format for those fields. */

#define CF_PB_TENSORS 3
#define CF_PB_SEQUENCE 5

static int pb_varint(const unsigned char **p, const unsigned char *end, uint64_t *v) {
  *v = 0;
  for (int shift = 0; *p < end && shift < 64; shift += 7) {
    unsigned char b = *(*p)++;
    *v |= (uint64_t)(b & 0x7f) << shift;
    if (!(b & 0x80)) return 1;
  }
  return 0;
}

/* the length-delimited fields numbered `field` of a message: calls fn on each; 0 on bad wire data */
static int pb_each(const unsigned char *buf, size_t len, int field,
                   int (*fn)(void *ctx, const unsigned char *b, size_t n), void *ctx) {
  const unsigned char *p = buf, *end = buf + len;
  while (p < end) {
    uint64_t key, n;
    if (!pb_varint(&p, end, &key)) return 0;
    switch (key & 7) {
    case 0: if (!pb_varint(&p, end, &n)) return 0; break;
    case 1: if (end - p < 8) return 0; p += 8; break;
    case 5: if (end - p < 4) return 0; p += 4; break;
    case 2:
      if (!pb_varint(&p, end, &n) || n > (uint64_t)(end - p)) return 0;
      if ((int)(key >> 3) == field && !fn(ctx, p, (size_t)n)) return 0;
      p += n;
      break;
    default: return 0;
    }
  }
  return 1;
}

/* tensors read from a value file, appended to a list */
typedef struct cf_list {
  pc_tensor *t;
  int n, cap, found;
} cf_list;

static int list_add_tensor(void *ctx, const unsigned char *b, size_t n) {
  cf_list *l = ctx;
  if (l->n == l->cap) return 0;
  Onnx__TensorProto *tp = onnx__tensor_proto__unpack(NULL, n, b);
  if (!tp) return 0;
  pc_graph *scratch = pc_graph_new();
  int ok = scratch && ox_tensor_decode(scratch, tp, NULL, &l->t[l->n]) == PC_OK;
  pc_graph_free(scratch);
  onnx__tensor_proto__free_unpacked(tp, NULL);
  l->n += ok;
  return ok;
}

static int list_add_sequence(void *ctx, const unsigned char *b, size_t n) {
  ((cf_list *)ctx)->found = 1;
  return pb_each(b, n, CF_PB_TENSORS, list_add_tensor, ctx);
}

/* what a graph input or output holds */
typedef enum { CF_TENSOR, CF_SEQUENCE, CF_OPTIONAL, CF_OTHER } cf_kind;

static cf_kind type_kind(const Onnx__ValueInfoProto *vi) {
  const Onnx__TypeProto *t = vi ? vi->type : NULL;
  if (!t || t->value_case == ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE) return CF_TENSOR;
  if (t->value_case == ONNX__TYPE_PROTO__VALUE_SEQUENCE_TYPE) return CF_SEQUENCE;
  if (t->value_case == ONNX__TYPE_PROTO__VALUE_OPTIONAL_TYPE) return CF_OPTIONAL;
  return CF_OTHER;
}

/* reads a SequenceProto / OptionalProto file into up to cap tensors; *none for an empty optional,
 * *holds_seq for an optional holding a sequence */
static int load_list(const char *path, cf_kind kind, pc_tensor *t, int cap, int *n, int *none, int *holds_seq,
                     char *err, size_t errlen) {
  size_t len;
  unsigned char *buf = read_file(path, &len);
  if (!buf) return snprintf(err, errlen, "cannot read %s", path), 0;
  cf_list l = {t, 0, cap, 0};
  int ok = pb_each(buf, len, CF_PB_TENSORS, list_add_tensor, &l);
  if (ok && kind == CF_OPTIONAL) ok = pb_each(buf, len, CF_PB_SEQUENCE, list_add_sequence, &l);
  free(buf);
  if (!ok) {
    free_tensor_list(t, l.n);
    return snprintf(err, errlen, "%s: not a readable %s", path, kind == CF_SEQUENCE ? "SequenceProto" : "OptionalProto"), 0;
  }
  *n = l.n;
  *none = kind == CF_OPTIONAL && !l.found && l.n == 0;
  *holds_seq = l.found;
  return 1;
}

/* the graph's input or output declarations of a model file (NULL when unreadable) */
static Onnx__ModelProto *read_model(const char *path) {
  size_t len;
  unsigned char *buf = read_file(path, &len);
  if (!buf) return NULL;
  char why[200];
  Onnx__ModelProto *m =
      wire_ok(buf, len, &onnx__model_proto__descriptor, why, sizeof why) ? onnx__model_proto__unpack(NULL, len, buf) : NULL;
  free(buf);
  if (m && !m->graph) onnx__model_proto__free_unpacked(m, NULL), m = NULL;
  return m;
}

/* the kinds and names of a model's graph inputs or outputs */
typedef struct cf_io {
  int n;
  cf_kind kind[CF_MAX_IO];
  char name[CF_MAX_IO][128];
  char dim_param[CF_MAX_IO][PC_MAX_RANK][64]; /* symbolic dims of tensor inputs ("" when fixed) */
} cf_io;

static void read_dim_params(const Onnx__ValueInfoProto *vi, char (*out)[64]) {
  const Onnx__TypeProto *t = vi ? vi->type : NULL;
  const Onnx__TensorShapeProto *sh = t && t->value_case == ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE && t->tensor_type
                                         ? t->tensor_type->shape : NULL;
  for (size_t k = 0; sh && k < sh->n_dim && k < PC_MAX_RANK; k++) {
    const Onnx__TensorShapeProto__Dimension *d = sh->dim[k];
    if (d && d->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM && d->dim_param)
      snprintf(out[k], 64, "%s", d->dim_param);
  }
}

/* 0 when the model is unreadable */
static int model_io(const char *path, int outputs, cf_io *io) {
  Onnx__ModelProto *m = read_model(path);
  memset(io, 0, sizeof *io);
  if (!m) return 0;
  size_t n = outputs ? m->graph->n_output : m->graph->n_input;
  for (size_t i = 0; i < n && io->n < CF_MAX_IO; i++) {
    const Onnx__ValueInfoProto *vi = outputs ? m->graph->output[i] : m->graph->input[i];
    io->kind[io->n] = type_kind(vi);
    read_dim_params(vi, io->dim_param[io->n]);
    snprintf(io->name[io->n++], sizeof io->name[0], "%s", vi && vi->name ? vi->name : "");
  }
  onnx__model_proto__free_unpacked(m, NULL);
  return 1;
}

static int has_lists(const cf_io *io) {
  for (int i = 0; i < io->n; i++)
    if (io->kind[i] != CF_TENSOR) return 1;
  return 0;
}

/* op type of the model's first node, for grouping failures */
static void model_op(const char *path, char *op, size_t cap) {
  size_t len;
  snprintf(op, cap, "?");
  unsigned char *buf = read_file(path, &len);
  if (!buf) return;
  char why[200];
  Onnx__ModelProto *m =
      wire_ok(buf, len, &onnx__model_proto__descriptor, why, sizeof why) ? onnx__model_proto__unpack(NULL, len, buf) : NULL;
  free(buf);
  if (m && m->graph && m->graph->n_node && m->graph->node[0]->op_type)
    snprintf(op, cap, "%s", m->graph->node[0]->op_type);
  if (m) onnx__model_proto__free_unpacked(m, NULL);
}

/* ---------------------------------------------------------------- comparison */

static int close_enough(double got, double want, double rtol) {
  if (isnan(want) || isnan(got)) return isnan(want) && isnan(got);
  if (isinf(want) || isinf(got)) return got == want;
  return fabs(got - want) <= CF_ATOL + rtol * fabs(want);
}

static int compare(const pc_tensor *got, const pc_tensor *want, int idx, char *err, size_t errlen) {
  if (got->dtype != want->dtype)
    return snprintf(err, errlen, "output %d: dtype %s, expected %s", idx, pc_dtype_name(got->dtype),
                    pc_dtype_name(want->dtype)), 0;
  int same = got->rank == want->rank;
  for (int i = 0; same && i < got->rank; i++) same = got->dims[i] == want->dims[i];
  if (!same) return snprintf(err, errlen, "output %d: shape differs (rank %d vs %d)", idx, got->rank, want->rank), 0;
  int64_t n = pc_tensor_numel(want) * (want->dtype == PC_c64 ? 2 : 1);
  int exact = !pc_dtype_is_float(want->dtype) && want->dtype != PC_c64;
  if (want->dtype == PC_i64) { /* beyond 2^53 doubles would hide differences */
    for (int64_t k = 0; k < n; k++)
      if (((const int64_t *)got->data)[k] != ((const int64_t *)want->data)[k])
        return snprintf(err, errlen, "output %d[%lld]: %lld, expected %lld", idx, (long long)k,
                        (long long)((const int64_t *)got->data)[k], (long long)((const int64_t *)want->data)[k]), 0;
    return 1;
  }
  pc_dtype lane = want->dtype == PC_c64 ? PC_f32 : want->dtype; /* complex: both halves */
  for (int64_t k = 0; k < n; k++) {
    double g = pc_elem_f64(lane, got->data, k), w = pc_elem_f64(lane, want->data, k);
    if (exact ? g != w : !close_enough(g, w, want->dtype == PC_bf16 ? CF_RTOL_BF16 : CF_RTOL))
      return snprintf(err, errlen, "output %d[%lld]: %.9g, expected %.9g", idx, (long long)k, g, w), 0;
  }
  return 1;
}

/* ---------------------------------------------------------------- one test */

/* the input tensors of one test_data_set_N, with the names their files carry (NULL when unnamed);
 * a sequence or optional input NAME contributes its elements as NAME.0, NAME.1... and a seq entry */
typedef struct cf_set {
  int n;
  pc_tensor t[CF_MAX_IO];
  char *name[CF_MAX_IO];
  int n_seqs;
  pc_seq_input seq[CF_MAX_IO];
  pc_type seq_type[CF_MAX_IO];
} cf_set;

static void free_set(cf_set *s) {
  free_tensor_list(s->t, s->n);
  for (int i = 0; i < s->n; i++) free(s->name[i]);
  s->n = 0;
}

/* input file i holding a sequence or an optional: its elements join the set */
static int load_set_list(const char *path, const char *nm, cf_kind kind, cf_set *s, char *err, size_t errlen) {
  int n, none, holds_seq;
  if (s->n_seqs == CF_MAX_IO) return snprintf(err, errlen, "too many sequence inputs"), 0;
  if (!load_list(path, kind, s->t + s->n, CF_MAX_IO - s->n, &n, &none, &holds_seq, err, errlen)) return 0;
  pc_seq_input *q = &s->seq[s->n_seqs++];
  q->name = nm, q->n = n, q->none = none, q->holds_seq = holds_seq, q->elems = s->seq_type + s->n;
  for (int k = 0; k < n; k++, s->n++) {
    const pc_tensor *t = &s->t[s->n];
    s->seq_type[s->n] = pc_type_make(t->dtype, t->rank, t->dims);
    size_t len = strlen(nm) + 24;
    s->name[s->n] = malloc(len);
    if (s->name[s->n]) snprintf(s->name[s->n], len, "%s.%d", nm, k);
  }
  return 1;
}

static int load_set(const char *ds, const cf_io *io, cf_set *s, char *err, size_t errlen) {
  char path[4096 + 64];
  memset(s, 0, sizeof *s);
  for (int i = 0; i < CF_MAX_IO && s->n < CF_MAX_IO; i++) {
    snprintf(path, sizeof path, "%s/input_%d.pb", ds, i);
    if (!is_file(path)) break;
    cf_kind kind = io && i < io->n ? io->kind[i] : CF_TENSOR;
    if (kind != CF_TENSOR) {
      if (!load_set_list(path, io->name[i], kind, s, err, errlen)) return free_set(s), 0;
      continue;
    }
    if (!load_pb(path, &s->t[s->n], &s->name[s->n], err, errlen)) return free_set(s), 0;
    s->n++;
  }
  return 1;
}

/* the expected outputs of a data set, sequences and optionals flattened like the importer does */
static int load_outputs(const char *ds, const cf_io *io, pc_tensor *want, int *n_want, char *err, size_t errlen) {
  char path[4096 + 64];
  *n_want = 0;
  for (int i = 0; i < io->n; i++) {
    snprintf(path, sizeof path, "%s/output_%d.pb", ds, i);
    if (io->kind[i] == CF_TENSOR) {
      char *tname = NULL;
      if (*n_want == CF_MAX_IO || !load_pb(path, &want[*n_want], &tname, err, errlen)) return 0;
      free(tname);
      ++*n_want;
      continue;
    }
    int n, none, holds_seq;
    if (!load_list(path, io->kind[i], want + *n_want, CF_MAX_IO - *n_want, &n, &none, &holds_seq, err, errlen)) return 0;
    *n_want += n;
  }
  return 1;
}

static int is_specialized(const pc_import_opts *o, const char *name) {
  for (int i = 0; o && name && i < o->n_consts; i++)
    if (strcmp(o->consts[i].name, name) == 0) return 1;
  return 0;
}

/* position of the graph input a tensor feeds: by name, else by its file index */
static int input_slot(const pc_graph *g, const char *tname, int file_index) {
  for (int i = 0; tname && i < g->n_inputs; i++)
    if (g->inputs[i]->name && strcmp(g->inputs[i]->name, tname) == 0) return i;
  return file_index < g->n_inputs ? file_index : -1;
}

/* runs g on one data set's inputs (less those the import made constants) and compares the outputs */
static cf_result run_data_set(pc_graph *g, const char *ds, const cf_io *outs_io, const cf_set *set,
                              const pc_import_opts *o, char *err, size_t errlen) {
  pc_tensor ins[CF_MAX_IO], outs[CF_MAX_IO], want[CF_MAX_IO];
  memset(ins, 0, sizeof ins), memset(outs, 0, sizeof outs), memset(want, 0, sizeof want);
  cf_result res = CF_FAIL;
  int n_in = 0, n_want = 0;
  if (g->n_inputs > CF_MAX_IO || g->n_outputs > CF_MAX_IO) return snprintf(err, errlen, "too many inputs/outputs"), CF_FAIL;
  for (int i = 0; i < set->n; i++) {
    if (is_specialized(o, set->name[i])) continue;
    int slot = input_slot(g, set->name[i], i);
    if (slot < 0 || ins[slot].data) {
      snprintf(err, errlen, "input_%d.pb matches no graph input", i);
      goto done;
    }
    ins[slot] = set->t[i]; /* borrowed: the set owns the data */
    n_in++;
  }
  if (n_in != g->n_inputs) {
    snprintf(err, errlen, "%d input files for %d graph inputs", n_in, g->n_inputs);
    goto done;
  }
  if (!load_outputs(ds, outs_io, want, &n_want, err, errlen)) goto done;
  if (n_want != g->n_outputs) {
    snprintf(err, errlen, "%d expected output tensors for %d graph outputs", n_want, g->n_outputs);
    goto done;
  }
  char cerr[512] = "";
  pc_status st = cf_compiled.on ? pc_conf_compiled_run(&cf_compiled, g, ds, o, ins, outs, cerr, sizeof cerr)
                                : pc_interp(g, ins, g->n_inputs, outs, g->n_outputs);
  if (st != PC_OK) {
    snprintf(err, errlen, "%s: %s", cf_compiled.on ? "compiled" : "interp", cf_compiled.on ? cerr : pc_error(g));
    res = st == PC_ERR_UNSUPPORTED ? CF_UNSUPPORTED : CF_FAIL;
    goto done;
  }
  res = CF_PASS;
  for (int i = 0; i < g->n_outputs && res == CF_PASS; i++)
    if (!compare(&outs[i], &want[i], i, err, errlen)) res = CF_FAIL;
done:
  free_tensor_list(outs, g->n_outputs < CF_MAX_IO ? g->n_outputs : CF_MAX_IO);
  free_tensor_list(want, n_want);
  return res;
}

/* an import error's message without the model path */
static void import_error(const pc_graph *g, char *err, size_t errlen) {
  const char *msg = pc_error(g);
  const char *tail = strstr(msg, "model.onnx: ");
  snprintf(err, errlen, "%s", tail ? tail + 12 : msg);
}

/* the input name in the importer's "input N ('NAME') must be a compile-time constant"; 0 when absent */
static int const_needed(const char *msg, char *name, size_t cap) {
  const char *end = strstr(msg, "') must be a compile-time constant");
  if (!end) return 0;
  const char *p = end;
  while (p > msg && !(p[-1] == '(' && p[0] == '\'')) p--;
  if (p == msg || (size_t)(end - p - 1) >= cap) return 0;
  snprintf(name, cap, "%.*s", (int)(end - p - 1), p + 1);
  return 1;
}

/* dtypes of inputs that may be fixed at compile time: ints (axes, pads, sizes), floats (Resize
 * scales/roi, Pad value, Range bounds, Dropout ratio) and bools (Dropout training_mode, Loop cond) */
static int specializable_dtype(pc_dtype dt) {
  return dt == PC_i64 || dt == PC_i32 || dt == PC_bool || pc_dtype_is_float(dt);
}

/* a data set input that may stand in for a constant: a small tensor of such a dtype named `name` */
static const pc_tensor *shape_input(const cf_set *s, const char *name) {
  for (int i = 0; i < s->n; i++) {
    const pc_tensor *t = &s->t[i];
    if (s->name[i] && strcmp(s->name[i], name) == 0 && specializable_dtype(t->dtype) &&
        pc_tensor_numel(t) <= CF_MAX_SPECIALIZE)
      return t;
  }
  return NULL;
}

/* adds to o the input the importer named when the data set has it as a small tensor; when the
 * name is not a graph input (a value computed from some), every small int input instead, and
 * once those are fixed every scalar float or bool (never float tensors: fixing data inputs would
 * make the test trivial); 0 when nothing was added */
static int specialize_more(const cf_set *s, const char *need, pc_import_opts *o, pc_const_input *consts,
                           char (*names)[128]) {
  int before = o->n_consts, named = 0;
  for (int i = 0; i < s->n; i++) named |= s->name[i] && strcmp(s->name[i], need) == 0;
  /* a computed value: the ints first, then (when no int is left) the scalar floats and bools, such as
   * Range bounds behind a Loop's trip count, never a float tensor */
  for (int pass = 0; pass < 2 && o->n_consts == before; pass++)
    for (int i = 0; i < s->n && o->n_consts < CF_MAX_IO; i++) {
      const char *nm = s->name[i];
      if (!nm || (named && strcmp(nm, need) != 0) || is_specialized(o, nm) || !shape_input(s, nm)) continue;
      const pc_tensor *t = shape_input(s, nm);
      if (!named && (pass == 0 ? !pc_dtype_is_int(t->dtype) : pc_dtype_is_int(t->dtype) || pc_tensor_numel(t) != 1)) continue;
      snprintf(names[o->n_consts], sizeof names[0], "%s", nm);
      consts[o->n_consts] = (pc_const_input){names[o->n_consts], *t, 0};
      o->n_consts++;
    }
  return o->n_consts > before;
}

/* bindings of the tensor inputs' dim_params to the data set's sizes (the first size met wins) */
static int bind_dim_params(const cf_io *io, const cf_set *s, pc_dim_binding *dims) {
  int n = 0;
  for (int i = 0; i < io->n; i++) {
    const pc_tensor *t = NULL;
    for (int e = 0; e < s->n && !t && io->kind[i] == CF_TENSOR; e++)
      if (s->name[e] && strcmp(s->name[e], io->name[i]) == 0) t = &s->t[e];
    for (int k = 0; t && k < t->rank && n < CF_MAX_IO; k++) {
      const char *p = io->dim_param[i][k];
      int seen = !*p;
      for (int j = 0; j < n && !seen; j++) seen = strcmp(dims[j].name, p) == 0;
      if (!seen) dims[n].name = p, dims[n].lo = dims[n].hi = t->dims[k], n++;
    }
  }
  return n;
}

/* Retries a model whose ops need some graph inputs at compile time: imports it once per data set
 * with those inputs fixed to the data set's values (as `--const-input` would), adding one input
 * each time the importer names another. On a pass, err lists the specialized inputs. */
static cf_result run_specialized(const char *dir, const char *model, const cf_io *in_io, const cf_io *out_io, char *err,
                                 size_t errlen) {
  char path[4096 + 64], names[512] = "";
  cf_result res = CF_PASS;
  int n_sets = 0;
  for (int i = 0; res == CF_PASS; i++, n_sets++) {
    snprintf(path, sizeof path, "%s/test_data_set_%d", dir, i);
    struct stat st;
    if (stat(path, &st) != 0) break;
    cf_set set;
    if (!load_set(path, in_io, &set, err, errlen)) return CF_FAIL;
    pc_const_input consts[CF_MAX_IO];
    char cname[CF_MAX_IO][128];
    pc_import_opts o;
    memset(&o, 0, sizeof o);
    o.consts = consts, o.gradient = pc_grad_values;
    o.seqs = set.seq, o.n_seqs = set.n_seqs; /* sequence inputs: their lengths are this data set's */
    /* their elements come with concrete shapes: the tensor inputs' symbolic dims take the data set's
     * sizes too (as --dim would), so that the two can meet in one op */
    pc_dim_binding dims[CF_MAX_IO];
    o.dims = dims, o.n_dims = set.n_seqs ? bind_dim_params(in_io, &set, dims) : 0;
    for (;;) {
      pc_graph *g = pc_onnx_load(model, &o);
      if (!g) {
        res = CF_FAIL, snprintf(err, errlen, "out of memory");
        break;
      }
      if (g->status == PC_OK) {
        res = run_data_set(g, path, out_io, &set, &o, err, errlen);
        pc_graph_free(g);
        break;
      }
      import_error(g, err, errlen);
      res = g->status == PC_ERR_UNSUPPORTED ? CF_UNSUPPORTED : CF_FAIL;
      pc_graph_free(g);
      char need[128];
      if (!const_needed(err, need, sizeof need) || !specialize_more(&set, need, &o, consts, cname)) break;
    }
    for (int k = 0; i == 0 && k < o.n_consts; k++)
      snprintf(names + strlen(names), sizeof names - strlen(names), "%s%s", k ? ", " : "", consts[k].name);
    /* a sequence input's length and element types are fixed at compile time too */
    for (int k = 0; i == 0 && k < set.n_seqs; k++)
      snprintf(names + strlen(names), sizeof names - strlen(names), "%s%s (list)", names[0] ? ", " : "", set.seq[k].name);
    free_set(&set);
  }
  if (res == CF_PASS && n_sets == 0) res = CF_FAIL, snprintf(err, errlen, "no test_data_set_0");
  if (res == CF_PASS) snprintf(err, errlen, names[0] ? "specialized: %s" : "", names);
  return res;
}

static cf_result run_test(const char *dir, char *err, size_t errlen) {
  char path[4096], model[4096];
  snprintf(model, sizeof model, "%s/model.onnx", dir);
  cf_io in_io, out_io;
  if (!model_io(model, 0, &in_io) || !model_io(model, 1, &out_io)) return snprintf(err, errlen, "cannot read %.900s", model), CF_FAIL;
  /* sequence inputs have a length per data set: import once per data set */
  if (has_lists(&in_io)) return run_specialized(dir, model, &in_io, &out_io, err, errlen);
  pc_import_opts plain = {.gradient = pc_grad_values};
  pc_graph *g = pc_onnx_load(model, &plain);
  if (!g) return snprintf(err, errlen, "out of memory"), CF_FAIL;
  cf_result res = CF_PASS;
  if (g->status != PC_OK) {
    import_error(g, err, errlen);
    res = g->status == PC_ERR_UNSUPPORTED ? CF_UNSUPPORTED : CF_FAIL;
    char name[128];
    if (const_needed(err, name, sizeof name)) {
      pc_graph_free(g);
      return run_specialized(dir, model, &in_io, &out_io, err, errlen);
    }
  }
  int n_sets = 0;
  for (int i = 0; res == CF_PASS; i++) {
    snprintf(path, sizeof path, "%s/test_data_set_%d", dir, i);
    struct stat st;
    if (stat(path, &st) != 0) break;
    cf_set set;
    if (!load_set(path, &in_io, &set, err, errlen)) res = CF_FAIL;
    else res = run_data_set(g, path, &out_io, &set, NULL, err, errlen), free_set(&set);
    n_sets++;
  }
  if (res == CF_PASS && n_sets == 0) res = CF_FAIL, snprintf(err, errlen, "no test_data_set_0");
  pc_graph_free(g);
  return res;
}

/* runs one test in a child process so that a crash or a hang in any layer costs one test only */
static cf_result run_isolated(const char *dir, char *err, size_t errlen) {
  int fd[2];
  if (pipe(fd) != 0) return run_test(dir, err, errlen);
  fflush(stdout);
  pid_t pid = fork();
  if (pid < 0) {
    close(fd[0]), close(fd[1]);
    return run_test(dir, err, errlen);
  }
  if (pid == 0) {
    close(fd[0]);
    alarm(CF_TIMEOUT_S);
    char msg[1024] = "";
    cf_result r = run_test(dir, msg, sizeof msg);
    char line[1100];
    int n = snprintf(line, sizeof line, "%d %s", (int)r, msg);
    if (write(fd[1], line, (size_t)(n < (int)sizeof line ? n : (int)sizeof line - 1)) < 0) _exit(3);
    _exit(0);
  }
  close(fd[1]);
  char buf[1100];
  size_t n = 0;
  ssize_t r;
  while (n < sizeof buf - 1 && (r = read(fd[0], buf + n, sizeof buf - 1 - n)) > 0) n += (size_t)r;
  buf[n] = 0;
  close(fd[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  if (n == 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    if (WIFSIGNALED(status))
      snprintf(err, errlen, "crashed (signal %d%s)", WTERMSIG(status), WTERMSIG(status) == SIGALRM ? ": timeout" : "");
    else snprintf(err, errlen, "child failed (status %d)", status);
    return CF_FAIL;
  }
  char *sp = strchr(buf, ' ');
  snprintf(err, errlen, "%s", sp ? sp + 1 : "");
  int code = atoi(buf);
  return code >= CF_PASS && code <= CF_UNSUPPORTED ? (cf_result)code : CF_FAIL;
}

/* ---------------------------------------------------------------- driver */

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

static char **list_tests(const char *dir, const char *filter, int *n) {
  DIR *d = opendir(dir);
  *n = 0;
  if (!d) return NULL;
  char **names = NULL;
  int cap = 0;
  struct dirent *e;
  char path[4096];
  while ((e = readdir(d))) {
    if (e->d_name[0] == '.' || (filter && !strstr(e->d_name, filter))) continue;
    snprintf(path, sizeof path, "%s/%s/model.onnx", dir, e->d_name);
    if (!is_file(path)) continue;
    if (*n == cap) {
      char **nn = realloc(names, sizeof *names * (size_t)(cap = cap ? cap * 2 : 256));
      if (!nn) break;
      names = nn;
    }
    names[(*n)++] = strdup(e->d_name);
  }
  closedir(d);
  if (names) qsort(names, (size_t)*n, sizeof *names, cmp_str);
  return names;
}

static const char *default_dir(void) {
  const char *env = getenv("ONNX_NODE_DIR");
  if (env && *env) {
    struct stat st;
    if (stat(env, &st) == 0 && S_ISDIR(st.st_mode)) return env;
  }
  return "build/onnx-node-tests";
}

/* tests of the expected list that did not pass; prints them */
static int check_expected(const char *file, const cf_test *tests, int n) {
  size_t len;
  unsigned char *buf = read_file(file, &len);
  if (!buf) return fprintf(stderr, "primc: error: cannot read %s\n", file), 1;
  char *text = malloc(len + 1);
  if (!text) return free(buf), 1;
  memcpy(text, buf, len);
  text[len] = 0;
  free(buf);
  int bad = 0;
  for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
    while (*line == ' ' || *line == '\t') line++;
    size_t l = strlen(line);
    while (l && (line[l - 1] == ' ' || line[l - 1] == '\r')) line[--l] = 0;
    if (!l || line[0] == '#') continue;
    const cf_test *t = NULL;
    for (int i = 0; i < n && !t; i++)
      if (strcmp(tests[i].name, line) == 0) t = &tests[i];
    if (!t || t->res != CF_PASS) {
      printf("REGRESSION %s: %s\n", line, t ? cf_names[t->res] : "not found");
      bad++;
    }
  }
  free(text);
  if (bad) printf("conformance: %d expected test%s did not pass\n", bad, bad == 1 ? "" : "s");
  return bad ? 1 : 0;
}

/* "op: n failed" lines, most failures first */
static void print_groups(const cf_test *tests, int n) {
  typedef struct { const char *op; int fail, unsup; } grp;
  grp *gs = calloc((size_t)n + 1, sizeof *gs);
  if (!gs) return;
  int ng = 0;
  for (int i = 0; i < n; i++) {
    if (tests[i].res == CF_PASS) continue;
    int k = 0;
    while (k < ng && strcmp(gs[k].op, tests[i].op) != 0) k++;
    if (k == ng) gs[ng++].op = tests[i].op;
    if (tests[i].res == CF_FAIL) gs[k].fail++;
    else gs[k].unsup++;
  }
  for (int i = 1; i < ng; i++) /* insertion sort by total, ties by name */
    for (int j = i; j > 0; j--) {
      grp *a = &gs[j - 1], *b = &gs[j];
      int ta = a->fail + a->unsup, tb = b->fail + b->unsup;
      if (ta > tb || (ta == tb && strcmp(a->op, b->op) <= 0)) break;
      grp t = *a;
      *a = *b, *b = t;
    }
  if (ng) printf("not passing by op type:\n");
  for (int i = 0; i < ng; i++) printf("  %-24s %3d failed, %3d unsupported\n", gs[i].op, gs[i].fail, gs[i].unsup);
  free(gs);
}

int pc_cmd_conformance(int argc, char **argv) {
  const char *dir = NULL, *filter = NULL, *expected = NULL;
  int list_failures = 0;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) return fputs(conf_help, stdout), 0;
    if (strcmp(a, "--list-failures") == 0) list_failures = 1;
    else if (pc_conf_compiled_flag(argc, argv, &i, &cf_compiled)) continue;
    else if (i + 1 < argc && strcmp(a, "--dir") == 0) dir = argv[++i];
    else if (i + 1 < argc && strcmp(a, "--filter") == 0) filter = argv[++i];
    else if (i + 1 < argc && strcmp(a, "--expected") == 0) expected = argv[++i];
    else return fprintf(stderr, "primc conformance: bad argument '%s'\n%s", a, conf_help), 2;
  }
  if (!dir) dir = default_dir();
  int n = 0;
  char **names = list_tests(dir, filter, &n);
  if (!names && n == 0) {
    fprintf(stderr, "primc: error: no ONNX node tests under '%s' (generate them with "
                    "python3 tests/ref/gen_onnx_node_tests.py %s)\n", dir, dir);
    if (!expected) return 1;
  }
  cf_test *tests = calloc((size_t)n + 1, sizeof *tests);
  if (!tests) return 1;
  int count[3] = {0, 0, 0}, n_special = 0;
  char path[4096], err[1024];
  for (int i = 0; i < n; i++) {
    tests[i].name = names[i];
    snprintf(path, sizeof path, "%s/%s", dir, names[i]);
    err[0] = 0;
    tests[i].res = run_isolated(path, err, sizeof err);
    snprintf(path, sizeof path, "%s/%s/model.onnx", dir, names[i]);
    model_op(path, tests[i].op, sizeof tests[i].op);
    count[tests[i].res]++;
    if (tests[i].res == CF_PASS) {
      n_special += err[0] != 0;
      if (!list_failures) printf(err[0] ? "PASS %s (%s)\n" : "PASS %s\n", names[i], err);
    } else {
      printf("%s %s: %s\n", cf_names[tests[i].res], names[i], err);
    }
    fflush(stdout);
  }
  print_groups(tests, n);
  printf("conformance: %d passed, %d failed, %d unsupported of %d", count[CF_PASS], count[CF_FAIL],
         count[CF_UNSUPPORTED], n);
  printf(n_special ? " (%d of the passes with specialized shape inputs)\n" : "\n", n_special);
  int rc = expected ? check_expected(expected, tests, n) : 0;
  for (int i = 0; i < n; i++) free(names[i]);
  free(names);
  free(tests);
  return rc;
}
