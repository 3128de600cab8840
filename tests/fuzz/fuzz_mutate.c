/* tests/fuzz/fuzz_mutate.c: structure-aware libFuzzer harness: a valid model from the seed set with fuzzer-chosen edits to its attributes, dims, types and wiring, through import, the -O pipeline and the kernel IR (no LLVM); a status, never a crash. */
#include "codegen/kir.h"
#include "frontend/frontend.h"
#include "onnx.pb-c.h"
#include "passes/passes.h"

#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/*
 * Seeds are valid ONNX models read once at start from PRIMC_FUZZ_MODELS (':'-separated files or
 * directories; a directory gives its .onnx files and the model.onnx of each subdirectory), at most
 * SEED_MAX bytes each. An input is
 * a seed index (2 bytes) then edits of 4 bytes each (op, which, where, value), applied to the unpacked
 * model in place; the edited model is packed again and imported as bytes, so the importer meets edited
 * models that still parse as protobuf: attributes out of range, dims that disagree, wrong element types,
 * inputs rewired to other values, dropped inputs and attributes, swapped op types. PRIMC_FUZZ_DUMP=FILE
 * writes each edited model there (run one crasher with it to keep the model under tests/data/onnx_bad/).
 */
#define SEED_MAX (512 << 10)

typedef struct seed {
  unsigned char *buf;
  size_t len;
} seed;
static seed *seeds;
static int n_seeds;

static void add_seed(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) return;
  unsigned char *buf = malloc(SEED_MAX);
  size_t n = buf ? fread(buf, 1, SEED_MAX, f) : 0;
  int more = fgetc(f) != EOF;
  fclose(f);
  Onnx__ModelProto *m = n && !more ? onnx__model_proto__unpack(NULL, n, buf) : NULL;
  if (!m) return free(buf);
  onnx__model_proto__free_unpacked(m, NULL);
  unsigned char *fit = realloc(buf, n); /* 1890 node tests at SEED_MAX each took 1 GB of the RSS limit */
  if (fit) buf = fit;
  seed *s = realloc(seeds, sizeof *s * (size_t)(n_seeds + 1));
  if (!s) return free(buf);
  seeds = s;
  seeds[n_seeds++] = (seed){buf, n};
}

static int ends_with(const char *s, const char *t) {
  size_t a = strlen(s), b = strlen(t);
  return a >= b && !strcmp(s + a - b, t);
}

static void add_dir(const char *dir) {
  DIR *d = opendir(dir);
  if (!d) return add_seed(dir);
  struct dirent *e;
  char path[4096];
  while ((e = readdir(d))) {
    if (e->d_name[0] == '.') continue;
    snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
    if (ends_with(e->d_name, ".onnx")) add_seed(path);
    else {
      snprintf(path, sizeof path, "%s/%s/model.onnx", dir, e->d_name);
      add_seed(path);
    }
  }
  closedir(d);
}

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerInitialize(int *argc, char ***argv) {
  const char *env = getenv("PRIMC_FUZZ_MODELS");
  char *list = strdup(env ? env : "tests/data/onnx_good:models");
  for (char *save = NULL, *p = strtok_r(list, ":", &save); p; p = strtok_r(NULL, ":", &save)) add_dir(p);
  free(list);
  fprintf(stderr, "fuzz_mutate: %d seed models\n", n_seeds);
  if (!n_seeds) {
    fprintf(stderr, "fuzz_mutate: no seed models (set PRIMC_FUZZ_MODELS)\n");
    exit(1);
  }
  return 0;
}

/* ---------------------------------------------------------------- an arena for the unpacked model */

typedef struct arena {
  void **p;
  size_t n, cap;
} arena;

static void *ar_alloc(void *ctx, size_t n) {
  arena *a = ctx;
  if (a->n == a->cap) {
    void **np = realloc(a->p, sizeof *np * (a->cap = a->cap ? a->cap * 2 : 256));
    if (!np) return NULL;
    a->p = np;
  }
  void *p = malloc(n ? n : 1);
  if (p) a->p[a->n++] = p;
  return p;
}
static void ar_free(void *ctx, void *p) { (void)ctx, (void)p; } /* everything goes with the arena */

static void ar_release(arena *a) {
  for (size_t i = 0; i < a->n; i++) free(a->p[i]);
  free(a->p);
}

/* ---------------------------------------------------------------- what can be edited */

#define MAXREF 4096
typedef struct refs {
  Onnx__NodeProto *node[MAXREF];
  Onnx__AttributeProto *attr[MAXREF];
  Onnx__ValueInfoProto *vi[MAXREF];
  Onnx__TensorProto *init[MAXREF];
  char *name[MAXREF];
  int n_node, n_attr, n_vi, n_init, n_name;
} refs;

static void add_name(refs *r, char *s) {
  if (s && *s && r->n_name < MAXREF) r->name[r->n_name++] = s;
}

static void collect(refs *r, Onnx__GraphProto *g, int depth) {
  if (!g || depth > 4) return;
  for (size_t i = 0; i < g->n_input; i++) {
    if (r->n_vi < MAXREF) r->vi[r->n_vi++] = g->input[i];
    add_name(r, g->input[i]->name);
  }
  for (size_t i = 0; i < g->n_output && r->n_vi < MAXREF; i++) r->vi[r->n_vi++] = g->output[i];
  for (size_t i = 0; i < g->n_value_info && r->n_vi < MAXREF; i++) r->vi[r->n_vi++] = g->value_info[i];
  for (size_t i = 0; i < g->n_initializer; i++) {
    if (r->n_init < MAXREF) r->init[r->n_init++] = g->initializer[i];
    add_name(r, g->initializer[i]->name);
  }
  for (size_t i = 0; i < g->n_node; i++) {
    Onnx__NodeProto *n = g->node[i];
    if (r->n_node < MAXREF) r->node[r->n_node++] = n;
    for (size_t j = 0; j < n->n_output; j++) add_name(r, n->output[j]);
    for (size_t j = 0; j < n->n_attribute; j++) {
      if (r->n_attr < MAXREF) r->attr[r->n_attr++] = n->attribute[j];
      collect(r, n->attribute[j]->g, depth + 1);
      for (size_t k = 0; k < n->attribute[j]->n_graphs; k++) collect(r, n->attribute[j]->graphs[k], depth + 1);
    }
  }
}

/* values that find edge cases: small, negative, zero, and a few huge */
static int64_t pick_int(uint8_t v) {
  static const int64_t t[] = {0, 1, 2, 3, -1, -2, 4, 7, 8, 16, 64, -3, 1000, INT32_MAX, INT64_MIN, INT64_MAX,
                              (int64_t)1 << 32, -1000, 5, 6};
  return v < 200 ? t[v % (sizeof t / sizeof *t)] : (int64_t)v - 228;
}
static float pick_float(uint8_t v) {
  static const float t[] = {0.0f, 1.0f, -1.0f, 0.5f, 2.0f, 1e-6f, 1e30f, -1e30f, 3.0f, 0.1f};
  if (v == 255) return __builtin_nanf("");
  if (v == 254) return __builtin_inff();
  return t[v % (sizeof t / sizeof *t)];
}
static char *pick_string(uint8_t v) {
  static char *t[] = {"", "NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID", "constant", "reflect", "edge", "linear",
                      "nearest", "cubic", "half_pixel", "asymmetric", "align_corners", "floor", "ceil", "tanh",
                      "none", "mean", "sum", "max", "ij,jk->ik", "...i,i->...", "N"};
  return t[v % (sizeof t / sizeof *t)];
}

static Onnx__TensorShapeProto *shape_of(Onnx__ValueInfoProto *vi) {
  Onnx__TypeProto *t = vi->type;
  if (!t || t->value_case != ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE || !t->tensor_type) return NULL;
  return t->tensor_type->shape;
}

static void edit(refs *r, arena *a, const uint8_t e[4]) {
  uint8_t which = e[1], where = e[2], v = e[3];
  switch (e[0] % 11) {
  case 0: case 1: { /* an attribute's value */
    if (!r->n_attr) return;
    Onnx__AttributeProto *at = r->attr[which % r->n_attr];
    if (at->n_ints) at->ints[where % at->n_ints] = pick_int(v);
    else if (at->n_floats) at->floats[where % at->n_floats] = pick_float(v);
    else if (at->has_i) at->i = pick_int(v);
    else if (at->has_f) at->f = pick_float(v);
    else if (at->has_s) {
      char *s = pick_string(v);
      at->s.data = (uint8_t *)s, at->s.len = strlen(s);
    }
    return;
  }
  case 2: { /* an ints attribute's length: shorter, or longer filled with a value */
    if (!r->n_attr) return;
    Onnx__AttributeProto *at = r->attr[which % r->n_attr];
    size_t n = where % 9;
    if (!at->n_ints && at->type != ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS) return;
    int64_t *p = ar_alloc(a, sizeof *p * (n ? n : 1));
    if (!p) return;
    for (size_t i = 0; i < n; i++) p[i] = i < at->n_ints ? at->ints[i] : pick_int(v);
    at->ints = p, at->n_ints = n;
    return;
  }
  case 3: { /* a dim of a graph input, output or value_info */
    if (!r->n_vi) return;
    Onnx__TensorShapeProto *s = shape_of(r->vi[which % r->n_vi]);
    if (!s || !s->n_dim) return;
    Onnx__TensorShapeProto__Dimension *d = s->dim[where % s->n_dim];
    if (v == 255) d->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM, d->dim_param = "N";
    else d->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE, d->dim_value = pick_int(v);
    return;
  }
  case 4: { /* a value's rank */
    if (!r->n_vi) return;
    Onnx__TensorShapeProto *s = shape_of(r->vi[which % r->n_vi]);
    if (!s) return;
    size_t n = where % 7;
    Onnx__TensorShapeProto__Dimension **d = ar_alloc(a, sizeof *d * (n ? n : 1));
    if (!d) return;
    for (size_t i = 0; i < n; i++) {
      if (i < s->n_dim) d[i] = s->dim[i];
      else {
        d[i] = ar_alloc(a, sizeof **d);
        if (!d[i]) return;
        onnx__tensor_shape_proto__dimension__init(d[i]);
        d[i]->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE, d[i]->dim_value = pick_int(v);
      }
    }
    s->dim = d, s->n_dim = n;
    return;
  }
  case 5: { /* a value's element type */
    if (!r->n_vi) return;
    Onnx__TypeProto *t = r->vi[which % r->n_vi]->type;
    if (t && t->value_case == ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE && t->tensor_type)
      t->tensor_type->has_elem_type = 1, t->tensor_type->elem_type = v % 27;
    return;
  }
  case 6: { /* rewire a node input to another value, or to none */
    if (!r->n_node) return;
    Onnx__NodeProto *n = r->node[which % r->n_node];
    if (!n->n_input) return;
    n->input[where % n->n_input] = v == 255 || !r->n_name ? "" : r->name[v % r->n_name];
    return;
  }
  case 7: { /* drop a node's last input or output */
    if (!r->n_node) return;
    Onnx__NodeProto *n = r->node[which % r->n_node];
    if (where & 1) {
      if (n->n_output) n->n_output--;
    } else if (n->n_input) n->n_input--;
    return;
  }
  case 8: { /* drop an attribute */
    if (!r->n_node) return;
    Onnx__NodeProto *n = r->node[which % r->n_node];
    if (!n->n_attribute) return;
    size_t k = where % n->n_attribute;
    n->attribute[k] = n->attribute[--n->n_attribute];
    return;
  }
  case 9: { /* an initializer's dim or element type */
    if (!r->n_init) return;
    Onnx__TensorProto *t = r->init[which % r->n_init];
    if (v & 1 && t->n_dims) t->dims[where % t->n_dims] = pick_int(v >> 1);
    else t->has_data_type = 1, t->data_type = (v >> 1) % 27;
    return;
  }
  case 10: { /* a node takes another node's op type */
    if (r->n_node < 2) return;
    r->node[which % r->n_node]->op_type = r->node[where % r->n_node]->op_type;
    return;
  }
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 2 || size > 4096) return 0;
  const seed *s = &seeds[(data[0] | data[1] << 8) % n_seeds];
  arena a = {0};
  ProtobufCAllocator al = {ar_alloc, ar_free, &a};
  Onnx__ModelProto *m = onnx__model_proto__unpack(&al, s->len, s->buf);
  if (!m) __builtin_trap(); /* seeds were checked at start */
  static refs r;
  memset(&r, 0, sizeof r);
  collect(&r, m->graph, 0);
  for (size_t i = 2; i + 4 <= size; i += 4) edit(&r, &a, data + i);
  size_t n = onnx__model_proto__get_packed_size(m);
  unsigned char *buf = malloc(n ? n : 1);
  if (buf) {
    onnx__model_proto__pack(m, buf);
    const char *dump = getenv("PRIMC_FUZZ_DUMP"); /* the edited model, to keep a crasher as a .onnx */
    FILE *df = dump ? fopen(dump, "wb") : NULL;
    if (df) fwrite(buf, 1, n, df), fclose(df);
    pc_graph *g = pc_onnx_load_buffer(buf, n, NULL, NULL);
    if (g && g->status == PC_OK) {
      pc_pipeline_opts po = {.opt_level = data[0] & 1 ? 2 : 0, .unfused = (data[1] & 1)};
      kir_program p;
      if (pc_pipeline_run(g, &po) == PC_OK && kir_build(g, &p) == PC_OK && kir_pack_weights(&p) == PC_OK)
        kir_pool_calls(&p);
    }
    pc_graph_free(g);
    free(buf);
  }
  ar_release(&a);
  return 0;
}
