/* codegen/kir_calls.c: kernels that are runtime calls (codegen/calls.def): the call table, and a builder
 * per prim kept whole (dot_general, conv, gather, scatter, cumsum, sort, topk, bitcast, random, fft,
 * nonzero) that lays out its params and args, with the copies of graph outputs. */
#include "codegen/kir_internal.h"
#include "codegen/autotune.h"
#include "runtime/primc_rt.h"

#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------- the table */

static const kir_call_row call_rows[KC_COUNT] = {
#define KIR_CALL(name, n_params, epi, params, args) \
  [KC_##name] = {#name, "primc_k_" #name, (epi) ? "primc_k_" #name "_epi" : NULL, n_params, params, args},
#include "codegen/calls.def"
#undef KIR_CALL
};

const kir_call_row *kir_call_info(kir_call c) { return &call_rows[c]; }

const char *kir_call_name(kir_call c) { return call_rows[c].name; }

/* a call kernel with its row's params (n_params of them where the row's count varies); NULL with
 * g's status set when out of memory or when n_params disagrees with the row */
static kir_kernel *call_kernel(kir_program *p, const pc_node *n, kir_call call, int n_params) {
  if (call_rows[call].n_params >= 0 && n_params != call_rows[call].n_params) {
    pc_fail(p->g, PC_ERR_INTERNAL, "codegen: a %s call built with %d params, calls.def says %d", call_rows[call].name,
            n_params, call_rows[call].n_params);
    return NULL;
  }
  kir_kernel *k = kir_kernel_new(p, KK_CALL);
  if (!k) return NULL;
  k->call = call;
  k->params = pc_alloc(p->g, sizeof(int64_t) * (size_t)(n_params ? n_params : 1));
  k->n_params = n_params;
  if (!k->params) return NULL;
  if (n) kir_kernel_origin(p, k, &n, 1);
  return k;
}

/* ---------------------------------------------------------------- builders */

static void call_arg(kir_kernel *k, int buf) { k->args[k->n_args++] = buf; }

/* shape params: rank then dims */
static int64_t *put_shape(int64_t *q, const pc_type *t) {
  *q++ = t->rank;
  for (int d = 0; d < PC_MAX_RANK; d++) *q++ = d < t->rank ? t->dims[d] : 1;
  return q;
}

/* an operand collapsed to [B, R, C] with element strides, or a transposed copy of it */
typedef struct mat3 {
  int64_t B, R, C, sb, sr, sc;
} mat3;

/* collapses the axes list (in the given order) to one extent and stride; 0 when not expressible */
static int collapse(const pc_type *t, const int64_t *axes, int n, int64_t *ext, int64_t *stride) {
  int64_t s[PC_MAX_RANK], prev = -1, e = 1, st = 0;
  kir_row_strides(t, s);
  for (int i = 0; i < n; i++) {
    int64_t a = axes[i];
    if (t->dims[a] == 1) continue;
    if (prev >= 0 && s[prev] != s[a] * t->dims[a]) return 0;
    prev = a;
    e *= t->dims[a];
    st = s[a];
  }
  *ext = e;
  *stride = e == 1 ? 0 : st;
  return 1;
}

/* operand x seen as [batch axes, row axes, col axes]; copies it to scratch when strides do not collapse */
static int operand_mat(kir_program *p, const pc_node *n, const pc_value *x, const int64_t *bax, int nb,
                       const int64_t *rax, int nr, const int64_t *cax, int nc, mat3 *m) {
  int buf = p->buf_of_value[x->id];
  if (collapse(&x->type, bax, nb, &m->B, &m->sb) && collapse(&x->type, rax, nr, &m->R, &m->sr) &&
      collapse(&x->type, cax, nc, &m->C, &m->sc) && (m->sc <= 1 || m->sr <= 1))
    return buf;
  int64_t perm[PC_MAX_RANK], ext[PC_MAX_RANK];
  int r = 0;
  for (int i = 0; i < nb; i++) perm[r++] = bax[i];
  for (int i = 0; i < nr; i++) perm[r++] = rax[i];
  for (int i = 0; i < nc; i++) perm[r++] = cax[i];
  amap src;
  memset(&src, 0, sizeof src);
  src.rank = x->type.rank;
  for (int i = 0; i < r; i++) {
    ext[i] = x->type.dims[perm[i]];
    src.coef[perm[i]][i + (r == 0)] = 1;
  }
  pc_type pt = pc_type_make(x->type.dtype, r, ext);
  int dst = kir_scratch_buf(p, x->type.dtype, kir_value_bytes(p->g, x), NULL);
  if (dst < 0 || !kir_copy_kernel(p, n, r, ext, dst, kir_map_scaled(&pt, r == 0, NULL, NULL), buf, kir_linearize(&src, &x->type),
                              x->type.dtype))
    return -1;
  collapse(&pt, (int64_t[]){0, 1, 2, 3, 4, 5, 6, 7}, nb, &m->B, &m->sb);
  collapse(&pt, (int64_t[]){0, 1, 2, 3, 4, 5, 6, 7} + nb, nr, &m->R, &m->sr);
  collapse(&pt, (int64_t[]){0, 1, 2, 3, 4, 5, 6, 7} + nb + nr, nc, &m->C, &m->sc);
  return dst;
}

static int free_axes(const pc_type *t, const int64_t *a, int na, const int64_t *b, int nb, int64_t *out) {
  int used[PC_MAX_RANK] = {0}, n = 0;
  for (int i = 0; i < na; i++) used[a[i]] = 1;
  for (int i = 0; i < nb; i++) used[b[i]] = 1;
  for (int d = 0; d < t->rank; d++)
    if (!used[d]) out[n++] = d;
  return n;
}

/* x seen as [batch axes, row axes, col axes] in place, its batch axes as one level (at == nb; *B2 1) or as two
 * split at `at` (outer bax[0..at), inner bax[at..nb)): 0 when a part does not collapse */
static int operand_in_place(const pc_value *x, const int64_t *bax, int nb, int at, const int64_t *rax, int nr,
                            const int64_t *cax, int nc, mat3 *m, int64_t *B2, int64_t *sb2) {
  *B2 = 1, *sb2 = 0;
  return collapse(&x->type, bax, at, &m->B, &m->sb) && (at == nb || collapse(&x->type, bax + at, nb - at, B2, sb2)) &&
         collapse(&x->type, rax, nr, &m->R, &m->sr) && collapse(&x->type, cax, nc, &m->C, &m->sc) &&
         (m->sc <= 1 || m->sr <= 1);
}

/* an f32 dot whose operands need two batch levels to be read in place (heads split off [B, S, H, D]) ->
 * primc_k_dot_b2, instead of a copy of each into [B, H, S, D]; 0 when one level serves or two do not */
static int build_dot_b2(kir_program *p, const pc_node *n, const int64_t *lb, const int64_t *rb, int nb, const int64_t *lf,
                        int nlf, const int64_t *lc, int nlc, const int64_t *rf, int nrf, const int64_t *rc, int nrc) {
  const pc_value *a = n->in[0], *b = n->in[1];
  mat3 ma, mb;
  int64_t a2, as2, b2, bs2;
  if (a->type.dtype != PC_f32 || nb < 2 ||
      (operand_in_place(a, lb, nb, nb, lf, nlf, lc, nlc, &ma, &a2, &as2) &&
       operand_in_place(b, rb, nb, nb, rc, nrc, rf, nrf, &mb, &b2, &bs2)))
    return 0;
  for (int at = 1; at < nb; at++) {
    if (!operand_in_place(a, lb, nb, at, lf, nlf, lc, nlc, &ma, &a2, &as2) ||
        !operand_in_place(b, rb, nb, at, rc, nrc, rf, nrf, &mb, &b2, &bs2))
      continue;
    kir_kernel *k = call_kernel(p, n, KC_dot_b2, 14);
    if (!k) return -1;
    int64_t prm[14] = {PC_f32, ma.B, a2, ma.R, mb.C, ma.C, ma.sb, as2, ma.sr, ma.sc, mb.sb, bs2, mb.sr, mb.sc};
    memcpy(k->params, prm, sizeof prm);
    call_arg(k, p->buf_of_value[n->out[0]->id]);
    call_arg(k, p->buf_of_value[a->id]);
    call_arg(k, p->buf_of_value[b->id]);
    return 1;
  }
  return 0;
}

/* dot_general -> primc_k_dot: [dtype, B, M, N, K, a_sb, a_sm, a_sk, b_sb, b_sk, b_sn], out contiguous [B,M,N] */
static pc_status build_dot(kir_program *p, const pc_node *n) {
  int nlc = 0, nrc = 0, nlb = 0, nrb = 0;
  const int64_t *lc = pc_attr_ints(n, "lhs_contract", &nlc), *rc = pc_attr_ints(n, "rhs_contract", &nrc);
  const int64_t *lb = pc_attr_ints(n, "lhs_batch", &nlb), *rb = pc_attr_ints(n, "rhs_batch", &nrb);
  const pc_value *a = n->in[0], *b = n->in[1];
  int64_t lf[PC_MAX_RANK], rf[PC_MAX_RANK];
  int nlf = free_axes(&a->type, lc, nlc, lb, nlb, lf), nrf = free_axes(&b->type, rc, nrc, rb, nrb, rf);
  int b2 = nlb == nrb ? build_dot_b2(p, n, lb, rb, nlb, lf, nlf, lc, nlc, rf, nrf, rc, nrc) : 0;
  if (b2) return b2 < 0 ? PC_ERR_NOMEM : PC_OK;
  mat3 ma, mb;
  int ba = operand_mat(p, n, a, lb, nlb, lf, nlf, lc, nlc, &ma);
  int bb = operand_mat(p, n, b, rb, nrb, rc, nrc, rf, nrf, &mb);
  if (ba < 0 || bb < 0) return PC_ERR_NOMEM;
  kir_kernel *k = call_kernel(p, n, KC_dot, 11);
  if (!k) return PC_ERR_NOMEM;
  int64_t prm[11] = {a->type.dtype, ma.B, ma.R, mb.C, ma.C, ma.sb, ma.sr, ma.sc, mb.sb, mb.sr, mb.sc};
  memcpy(k->params, prm, sizeof prm);
  call_arg(k, p->buf_of_value[n->out[0]->id]);
  call_arg(k, ba);
  call_arg(k, bb);
  return PC_OK;
}

int kir_kernel_node(const kir_kernel *k) { return k->n_nodes ? k->nodes[0]->id : -1; }

/* A 2-D f32 conv call's row (runtime/conv/plan.c): for plain weights, or for constant weights packed as
 * the plan wants (kir_pack_weights); the row pinned for the conv node of that id (p->pins), else
 * PRIMC_CONV_ROW=NAME in the environment, forces a row where it fits. */
int kir_conv_plan(const kir_program *p, int node, const primc_conv2d *c, int packable, primc_conv_plan *plan) {
  const char *force = getenv("PRIMC_CONV_ROW");
  for (int i = 0; i < p->n_pins; i++)
    if (p->pins[i].node == node) force = primc_conv_row_name(p->pins[i].row);
  primc_conv_plan_opts o = {.packable = packable > 0, .layout = PRIMC_CONV_W_PLAIN,
                            .tile_mr = packable ? primc_sgemm_mr() : 0, .has_scratch = 1, .force = force,
                            .bf16 = p->g->autocast == PC_AUTOCAST_BF16 && !p->g->bf16_f32_rows, .weights_stream = p->weights_stream,
                            .batch_tiles = packable > 0 && !p->sizes_vary, .weights_once = packable == 1};
  return pc_autotune_plan(p->tune, c, &o, plan) == PRIMC_OK; /* the planner's plan when p->tune is NULL */
}

/* conv -> primc_k_conv: [dtype, x shape(9), w shape(9), out shape(9), groups, stride, pad_lo, dilation,
 * lhs_dilation (8 each), fused epilogue (CONV_EPI_WORDS, zero until fuse_conv_epilogues fills it)] */
static pc_status build_conv(kir_program *p, const pc_node *n) {
  kir_kernel *k = call_kernel(p, n, KC_conv, CONV_EPI_AT + CONV_EPI_WORDS);
  if (!k) return PC_ERR_NOMEM;
  int64_t *q = k->params;
  *q++ = n->in[0]->type.dtype;
  q = put_shape(q, &n->in[0]->type);
  q = put_shape(q, &n->in[1]->type);
  q = put_shape(q, &n->out[0]->type);
  *q++ = pc_attr_int(n, "groups", 1);
  static const char *const lists[4] = {"stride", "pad_lo", "dilation", "lhs_dilation"};
  static const int64_t dflt[4] = {1, 0, 1, 1};
  for (int l = 0; l < 4; l++) {
    int len = 0;
    const int64_t *v = pc_attr_ints(n, lists[l], &len);
    for (int i = 0; i < 8; i++) *q++ = v && i < len ? v[i] : dflt[l];
  }
  memset(q, 0, sizeof *q * CONV_EPI_WORDS);
  call_arg(k, p->buf_of_value[n->out[0]->id]);
  call_arg(k, p->buf_of_value[n->in[0]->id]);
  call_arg(k, p->buf_of_value[n->in[1]->id]);
  /* scratch for the f32 GEMM paths: im2col, C/groups * prod(kernel) * prod(out spatial) floats, or what
   * the 2-D runtime conv asks for (a padded copy of the input for stride-1 convs) */
  const pc_type *w = &n->in[1]->type, *o = &n->out[0]->type;
  int64_t cols = w->dims[1];
  for (int d = 2; d < w->rank; d++) /* checked: a 2^31-tap ConvTranspose kernel overflowed the product */
    if (__builtin_mul_overflow(cols, w->dims[d], &cols) || __builtin_mul_overflow(cols, o->dims[d], &cols) ||
        cols > PC_MAX_NUMEL)
      return pc_node_fail(p->g, n, PC_ERR_RANGE, "the conv's im2col scratch would hold more than %lld floats",
                          (long long)PC_MAX_NUMEL);
  primc_conv2d c2;
  primc_conv_plan plain, packed;
  /* CUDA's split-K partials go to the col's room (cuda_gemm.c), planned for no CPU row: the same on every host */
  if (!p->gpu_sm && primc_conv2d_of_params(k->params, &c2) && kir_conv_plan(p, n->id, &c2, 0, &plain)) {
    /* the row for plain weights until kir_pack_weights packs them for its own plan: room for either */
    k->params[CONV_EPI_AT + CONV_EPI_ROW] = plain.row + 1;
    int64_t need = primc_conv_plan_scratch_floats(&c2, &plain);
    /* constant weights are planned with the batch's tiles unless the sizes vary (known after the build): room for
     * either plan; computed ones per image */
    const kir_buf *wb = &p->bufs[p->buf_of_value[n->in[1]->id]];
    int computed = wb->place != KP_CONST || !wb->v || !pc_const_data(wb->v);
    for (int how = computed ? KIR_PACK_PER_CALL : 1; how <= KIR_PACK_PER_CALL; how++)
      if (kir_conv_plan(p, n->id, &c2, how, &packed) && primc_conv_plan_scratch_floats(&c2, &packed) > need)
        need = primc_conv_plan_scratch_floats(&c2, &packed);
    if (need > cols) cols = need;
  }
  int64_t bytes = cols * 4;
  if (n->out[0]->type.dtype == PC_i32) { /* the exact paths of integer convs: im2col, W and the sums (f64 in chunks) */
    int64_t og = w->dims[0] / pc_attr_int(n, "groups", 1), kk = w->dims[1], pix = 1;
    for (int d = 2; d < w->rank; d++) kk *= w->dims[d], pix *= o->dims[d];
    bytes = primc_conv_i32_scratch_bytes(kk, pix, og);
  }
  call_arg(k, kir_call_scratch_buf(p, PC_f32, bytes));
  return PC_OK;
}

/* generic runtime call: [dtype, in shape, out shape, attrs...]; outputs then inputs as args */
static pc_status build_generic_call(kir_program *p, const pc_node *n, kir_call call, const int64_t *extra, int n_extra) {
  int np = 1 + 9 * (n->n_in + n->n_out) + n_extra;
  kir_kernel *k = call_kernel(p, n, call, np);
  if (!k) return p->g->status ? p->g->status : PC_ERR_NOMEM;
  int64_t *q = k->params;
  *q++ = n->n_in ? n->in[0]->type.dtype : n->out[0]->type.dtype;
  for (int i = 0; i < n->n_in; i++) q = put_shape(q, &n->in[i]->type);
  for (int i = 0; i < n->n_out; i++) q = put_shape(q, &n->out[i]->type);
  for (int i = 0; i < n_extra; i++) *q++ = extra[i];
  for (int i = 0; i < n->n_out; i++) call_arg(k, p->buf_of_value[n->out[i]->id]);
  for (int i = 0; i < n->n_in; i++) call_arg(k, p->buf_of_value[n->in[i]->id]);
  return PC_OK;
}

static int64_t scatter_mode(const char *s) {
  static const char *const modes[] = {"none", "add", "mul", "max", "min"};
  for (int i = 0; i < 5; i++)
    if (!strcmp(s, modes[i])) return i;
  return -1;
}


/* gather; when its table is an unmaterialized pure index remapping of a buffer (the
 * broadcast ONNX Gather decomposes into), primc_k_gather_strided reads that buffer
 * through [offset, strides] appended to the params instead of a materialized copy */
static pc_status build_gather(kir_program *p, const pc_node *n) {
  const pc_value *x = n->in[0];
  int64_t e[2 + 1 + PC_MAX_RANK] = {pc_attr_int(n, "axis", 0), n->in[1]->type.dtype};
  if (p->buf_of_value[x->id] >= 0) return build_generic_call(p, n, KC_gather, e, 2);
  amap m = kir_amap_identity(x->type.rank, 0);
  kir_expr *ld = kir_expr_value(p, x, &m);
  if (!ld || ld->kind != KE_LOAD) { /* computed: materialize it first */
    kir_materialize(p, x);
    pc_status s = x->producer ? kir_build_pointwise(p, x->producer) : PC_ERR_INTERNAL;
    return s != PC_OK ? s : build_generic_call(p, n, KC_gather, e, 2);
  }
  e[2] = ld->map.offset;
  for (int d = 0; d < PC_MAX_RANK; d++) e[3 + d] = d < x->type.rank ? ld->map.stride[d] : 0;
  pc_status s = build_generic_call(p, n, KC_gather_strided, e, 2 + 1 + PC_MAX_RANK);
  if (s == PC_OK) p->kernels[p->n_kernels - 1].args[1] = ld->buf; /* the underlying buffer */
  return s;
}

static pc_status build_scatter(kir_program *p, const pc_node *n) {
  int64_t e[3] = {pc_attr_int(n, "axis", 0), n->in[1]->type.dtype, scatter_mode(pc_attr_str(n, "reduce", "none"))};
  if (e[2] < 0) return pc_node_fail(p->g, n, PC_ERR_ATTR, "unknown scatter reduce");
  return build_generic_call(p, n, KC_scatter, e, 3);
}

static pc_status build_cumsum(kir_program *p, const pc_node *n) {
  int64_t e[3] = {pc_attr_int(n, "axis", 0), pc_attr_int(n, "exclusive", 0), pc_attr_int(n, "reverse", 0)};
  return build_generic_call(p, n, KC_cumsum, e, 3);
}

/* sort and topk share primc_k_sort; its permutation scratch (2 * axis length i64) is in the workspace */
static pc_status sort_call(kir_program *p, const pc_node *n, const int64_t *e) {
  pc_status s = build_generic_call(p, n, KC_sort, e, 3);
  const pc_type *t = &n->in[0]->type;
  int64_t axis = e[0] < 0 ? e[0] + t->rank : e[0];
  int64_t len = t->rank && axis >= 0 && axis < t->rank ? t->dims[axis] : 1;
  if (s == PC_OK) call_arg(&p->kernels[p->n_kernels - 1], kir_scratch_buf(p, PC_i64, 16 * (len + 1), NULL));
  return s;
}

static pc_status build_sort(kir_program *p, const pc_node *n) {
  int64_t e[3] = {pc_attr_int(n, "axis", -1), pc_attr_int(n, "descending", 0), -1};
  return sort_call(p, n, e);
}

static pc_status build_topk(kir_program *p, const pc_node *n) {
  int64_t e[3] = {pc_attr_int(n, "axis", -1), pc_attr_int(n, "largest", 1), pc_attr_int(n, "k", 1)};
  return sort_call(p, n, e);
}

static pc_status build_bitcast(kir_program *p, const pc_node *n) {
  return build_generic_call(p, n, KC_copy, NULL, 0);
}

static pc_status build_random(kir_program *p, const pc_node *n) {
  const char *dist = pc_attr_str(n, "dist", "uniform");
  double a = pc_attr_float(n, "a", 0), b = pc_attr_float(n, "b", 1);
  int64_t e[4] = {!strcmp(dist, "normal"), pc_attr_int(n, "seed", 0), 0, 0};
  memcpy(&e[2], &a, 8);
  memcpy(&e[3], &b, 8);
  return build_generic_call(p, n, KC_random, e, 4);
}

static pc_status build_fft(kir_program *p, const pc_node *n) {
  static const char *const types[] = {"fft", "ifft", "rfft", "irfft"};
  const char *t = pc_attr_str(n, "type", "fft");
  int64_t e[2] = {-1, pc_attr_int(n, "length", 0)};
  for (int i = 0; i < 4; i++)
    if (!strcmp(t, types[i])) e[0] = i;
  if (e[0] < 0) return pc_node_fail(p->g, n, PC_ERR_ATTR, "unknown fft type \"%s\"", t);
  pc_status s = build_generic_call(p, n, KC_fft, e, 2);
  const pc_type *a = &n->in[0]->type, *b = &n->out[0]->type;
  int64_t w = a->dims[a->rank - 1] > b->dims[b->rank - 1] ? a->dims[a->rank - 1] : b->dims[b->rank - 1];
  if (w < e[1]) w = e[1];
  if (s == PC_OK) call_arg(&p->kernels[p->n_kernels - 1], kir_scratch_buf(p, PC_f64, primc_fft_scratch_bytes(w), NULL));
  return s;
}

/* nonzero -> primc_k_nonzero (out, x, count): check_dynamic let it through as a graph output only;
 * the count goes to an i64 in the workspace that NAME_output_dims reads after the run */
static pc_status build_nonzero(kir_program *p, const pc_node *n) {
  kir_kernel *k = call_kernel(p, n, KC_nonzero, 1 + 9);
  if (!k) return PC_ERR_NOMEM;
  k->params[0] = n->in[0]->type.dtype;
  put_shape(k->params + 1, &n->in[0]->type);
  int slot = kir_scratch_buf(p, PC_i64, 8, NULL);
  if (slot < 0) return PC_ERR_NOMEM;
  p->sym_slot[PC_DIM_SYM_ID(n->out[0]->type.dims[1])] = p->bufs[slot].offset;
  call_arg(k, p->buf_of_value[n->out[0]->id]);
  call_arg(k, p->buf_of_value[n->in[0]->id]);
  call_arg(k, slot);
  return PC_OK;
}


kir_build_fn kir_call_builder(pc_op op) {
  PC_PRIMS_CHECKED(74); /* a call per prim kept whole; kir.c's build_rule has the rest */
  static const kir_build_fn rules[PC_OP_COUNT] = {
      [PC_OP_dot_general] = build_dot, [PC_OP_conv] = build_conv,     [PC_OP_gather] = build_gather,
      [PC_OP_scatter] = build_scatter, [PC_OP_cumsum] = build_cumsum, [PC_OP_sort] = build_sort,
      [PC_OP_topk] = build_topk,       [PC_OP_bitcast] = build_bitcast, [PC_OP_random] = build_random,
      [PC_OP_fft] = build_fft,         [PC_OP_nonzero] = build_nonzero,
  };
  return rules[op];
}

/* graph outputs not written in place (inputs, constants, repeated values) get a copy */
pc_status kir_copy_outputs(kir_program *p) {
  pc_graph *g = p->g;
  for (int i = 0; i < g->n_outputs; i++) {
    const pc_value *v = g->outputs[i];
    int src = p->buf_of_value[v->id];
    if (src < 0) return pc_fail(g, PC_ERR_INTERNAL, "output %d is not materialized", i);
    if (p->bufs[src].place == KP_OUTPUT && p->bufs[src].index == i) continue;
    kir_buf b = {KP_OUTPUT, i, 0, kir_value_bytes(p->g, v), v->type.dtype, v};
    int dst = kir_buf_add(p, b);
    kir_kernel *k = dst < 0 ? NULL : call_kernel(p, NULL, KC_copy, 1 + 18);
    if (!k) return PC_ERR_NOMEM;
    pc_type t = kir_bound_type(g, &v->type); /* a nonzero result listed twice: copied whole */
    k->params[0] = v->type.dtype;
    put_shape(put_shape(k->params + 1, &t), &t);
    call_arg(k, dst);
    call_arg(k, src);
  }
  return PC_OK;
}

/* ---------------------------------------------------------------- attention */

_Static_assert(PRIMC_ATTENTION_MAX_DIM == PC_ATTENTION_MAX_DIM, "the matcher's head dims are the runtime's");

/* x read in place through the index maps its group took in: offset and strides of its dims b0, b1 (the
 * last two batch dims; 0 when absent), row and col into q; its buffer, or -1 when x is not one load */
static int strided_operand(kir_program *p, const pc_value *x, int row, int col, int64_t *q) {
  int r = x->type.rank;
  amap m = kir_amap_identity(r, 0);
  kir_expr *e = kir_expr_value(p, x, &m);
  if (e && e->kind != KE_LOAD) { /* a constant the builder reads as an expression (one value, say): stored */
    pc_type t = kir_bound_type(p->g, &x->type);
    int buf = kir_scratch_buf(p, x->type.dtype, kir_value_bytes(p->g, x), NULL);
    kir_kernel *k = buf < 0 || t.rank < 1 ? NULL : kir_kernel_new(p, KK_LOOP);
    if (!k) return -1;
    k->n_loops = k->n_par = t.rank;
    memcpy(k->extent, t.dims, sizeof *t.dims * (size_t)t.rank);
    k->n_stores = 1;
    k->stores[0] = (kir_store){buf, kir_map_scaled(&t, 0, NULL, NULL), e, KR_NONE, 0, 0};
    kir_kernel_origin(p, k, (const pc_node *const *)&x->producer, x->producer ? 1 : 0);
    e = kir_expr_new(p, KE_LOAD, x->type.dtype);
    if (!e) return -1;
    e->buf = buf, e->map = k->stores[0].map;
  }
  if (!e || e->kind != KE_LOAD) return -1;
  q[0] = e->map.offset;
  q[1] = r >= 4 ? e->map.stride[r - 4] : 0;
  q[2] = r >= 3 ? e->map.stride[r - 3] : 0;
  q[3] = e->map.stride[row];
  q[4] = e->map.stride[col];
  return e->buf;
}

/* buf, whose elements are of half type t (an f16 model's additive mask), widened to f32 whole into a scratch buffer
 * by a loop kernel before the call, which reads it through the same index map: the mask's own elements, not the
 * [.., Sq, Sk] its broadcasts make of them */
static int widened_buf(kir_program *p, int buf, pc_dtype t, const pc_value *v) {
  int64_t n = p->bufs[buf].nbytes / (int64_t)pc_dtype_size(t);
  int nb = n > 0 ? kir_scratch_buf(p, PC_f32, n * (int64_t)sizeof(float), NULL) : -1;
  kir_kernel *k = nb < 0 ? NULL : kir_kernel_new(p, KK_LOOP);
  kir_expr *ld = k ? kir_expr_new(p, KE_LOAD, t) : NULL, *cv = ld ? kir_expr_new(p, KE_CONVERT, PC_f32) : NULL;
  if (!cv) return -1;
  ld->buf = buf;
  memset(&ld->map, 0, sizeof ld->map);
  ld->map.stride[0] = 1;
  cv->n_args = 1, cv->args[0] = ld;
  k->n_loops = k->n_par = 1;
  k->extent[0] = n;
  k->n_stores = 1;
  k->stores[0] = (kir_store){nb, ld->map, cv, KR_NONE, 0, 0};
  kir_kernel_origin(p, k, (const pc_node *const *)&v->producer, v->producer ? 1 : 0);
  return nb;
}

/* a group that fuse.c made of one attention chain (two dot_generals): one primc_k_attention call reading
 * Q, K, V and the mask in place; the scores, softmax and index maps between them are never stored */
pc_status kir_build_attention(kir_program *p, const pc_node *const *nodes, int n) {
  const pc_node *pv = NULL;
  for (int i = 0; i < n; i++)
    if (nodes[i]->op == PC_OP_dot_general) pv = nodes[i];
  pc_attention a;
  if (!pv || !pc_attention_match(p->g, pv, NULL, &a))
    return pc_fail(p->g, PC_ERR_INTERNAL, "codegen: a group with two contractions is not an attention chain");
  const pc_value *Q = a.qk->in[0], *K = a.qk->in[1], *V = pv->in[1], *Y = pv->out[0];
  int r = Y->type.rank;
  kir_materialize(p, Y);
  /* the operands first: one that is not a load is stored by a loop kernel, which must run before the call */
  int64_t q[PRIMC_ATTENTION_PARAMS];
  q[0] = PC_f32;
  q[1] = r >= 4 ? Y->type.dims[r - 4] : 1;
  q[2] = r >= 3 ? Y->type.dims[r - 3] : 1;
  q[3] = Q->type.dims[r - 2], q[4] = V->type.dims[r - 2], q[5] = Q->type.dims[r - 1], q[6] = V->type.dims[r - 1];
  int bq = strided_operand(p, Q, r - 2, r - 1, q + 7);
  int bk = strided_operand(p, K, a.k_trans ? r - 1 : r - 2, a.k_trans ? r - 2 : r - 1, q + 12);
  int bv = strided_operand(p, V, r - 2, r - 1, q + 17);
  int bm = a.mask ? strided_operand(p, a.mask, r - 2, r - 1, q + 22) : -2;
  if (bm >= 0 && a.mask->type.dtype != PC_f32) bm = widened_buf(p, bm, a.mask->type.dtype, a.mask);
  int by = strided_operand(p, Y, r - 2, r - 1, q + 27);
  if (!a.mask) memset(q + 22, 0, sizeof *q * 5);
  if (bq < 0 || bk < 0 || bv < 0 || bm == -1 || by < 0)
    return pc_node_fail(p->g, pv, PC_ERR_INTERNAL, "codegen: an attention operand is not read in place");
  q[32] = (a.mask ? 1 : 0) | (a.causal ? 2 : 0);
  memcpy(&q[33], &a.scale, sizeof a.scale);
  kir_kernel *k = call_kernel(p, pv, KC_attention, PRIMC_ATTENTION_PARAMS);
  if (!k) return PC_ERR_NOMEM;
  kir_kernel_origin(p, k, nodes, n);
  memcpy(k->params, q, sizeof q);
  call_arg(k, by), call_arg(k, bq), call_arg(k, bk), call_arg(k, bv);
  if (a.mask) call_arg(k, bm);
  return PC_OK;
}

/* ---------------------------------------------------------------- a weight gradient over columns read in place */

pc_status kir_build_dot_cols(kir_program *p, const pc_columns *m, const pc_node *const *nodes, int n) {
  const pc_node *d = m->dot;
  const pc_value *a = d->in[0], *xp = m->xp, *y = d->out[0];
  kir_materialize(p, y);
  int64_t q[PRIMC_DOT_COLS_PARAMS] = {0}, taps = 1;
  q[0] = a->type.dims[0], q[1] = a->type.dims[1];
  /* a read in place from the output gradient where fuse.c put its transpose in the group, else a stored [M, K] */
  int ba;
  if (m->gy) {
    amap gm = kir_amap_identity(m->gy->type.rank, 0);
    kir_expr *ge = kir_expr_value(p, m->gy, &gm);
    if (!ge || ge->kind != KE_LOAD)
      return pc_node_fail(p->g, d, PC_ERR_INTERNAL, "codegen: a weight gradient's output gradient is not read in place");
    ba = ge->buf, q[2] = ge->map.stride[1], q[22] = 1, q[23] = ge->map.stride[0], q[27] = ge->map.offset;
    for (int s = 0; s < m->ns; s++) q[24 + s] = ge->map.stride[2 + s];
  } else {
    mat3 ma;
    if ((ba = operand_mat(p, d, a, NULL, 0, (int64_t[]){0}, 1, (int64_t[]){1}, 1, &ma)) < 0) return PC_ERR_NOMEM;
    q[2] = ma.sr, q[3] = ma.sc;
  }
  /* the padded input [C, N, sp..], or (fuse.c took its transpose and pad into the group) x [N, C, sp..] unpadded */
  const pc_value *src = m->x ? m->x : xp;
  amap im = kir_amap_identity(src->type.rank, 0);
  kir_expr *e = kir_expr_value(p, src, &im);
  if (!e || e->kind != KE_LOAD || p->buf_of_value[y->id] < 0 || (m->x && !pc_columns_reads_x(m)))
    return pc_node_fail(p->g, d, PC_ERR_INTERNAL, "codegen: a weight gradient's padded input is not read in place");
  int cd = m->x ? 1 : 0, nd = m->x ? 0 : 1; /* x's channel and image dims */
  q[4] = m->C, q[5] = e->map.stride[cd], q[6] = m->images, q[7] = e->map.stride[nd], q[8] = m->ns;
  for (int s = 0; s < 3; s++) {
    int on = s < m->ns;
    q[9 + s] = on ? m->od[s] : 1, q[12 + s] = on ? m->st[s] * e->map.stride[2 + s] : 0;
    q[15 + s] = on ? m->kd[s] : 1, q[18 + s] = on ? m->dil[s] * e->map.stride[2 + s] : 0;
    taps *= q[15 + s];
  }
  q[21] = e->map.offset;
  /* a 3x3 whose stride equals its dilation (taps and pixels on one grid) as Winograd F(2x2, 3x3), where it fits */
  int wino = pc_columns_winograd(m);
  q[28] = wino ? PRIMC_WGRAD_WINOGRAD : PRIMC_WGRAD_COLUMNS;
  q[29] = 0, q[30] = q[9] + 2, q[31] = 0, q[32] = q[10] + 2; /* the window grid all of xp */
  if (m->x) { /* x's rows and columns within the grid, which starts lo before them */
    q[21] -= m->x_lo[0] * q[12] + m->x_lo[1] * q[13];
    q[29] = m->x_lo[0], q[30] = m->x_lo[0] + m->x->type.dims[2], q[31] = m->x_lo[1], q[32] = m->x_lo[1] + m->x->type.dims[3];
  }
  int scratch = wino ? kir_call_scratch_buf(p, PC_f32, (int64_t)sizeof(float) *
                                                           primc_wgrad_wino_floats(q[0], m->C, m->images, m->od[0], m->od[1]))
                     : kir_call_scratch_buf(p, PC_i64, (int64_t)sizeof(int64_t) * (m->C * taps + 2 * q[1]));
  kir_kernel *k = scratch < 0 ? NULL : call_kernel(p, d, KC_dot_cols, PRIMC_DOT_COLS_PARAMS);
  const pc_node **origin = pc_alloc(p->g, sizeof *origin * (size_t)n); /* the dot first: it names the kernel */
  if (!k || !origin) return PC_ERR_NOMEM;
  int no = 0;
  origin[no++] = d;
  for (int i = 0; i < n; i++)
    if (nodes[i] != d) origin[no++] = nodes[i];
  kir_kernel_origin(p, k, origin, no);
  memcpy(k->params, q, sizeof q);
  call_arg(k, p->buf_of_value[y->id]), call_arg(k, ba), call_arg(k, e->buf), call_arg(k, scratch);
  return PC_OK;
}
