/* codegen/kir_print.c: the kernel IR in words: `primc dump --kernels`'s listing, and the profiler's label
 * and bytes moved per kernel. */
#include "codegen/kir_internal.h"
#include "codegen/autotune.h"
#include "runtime/primc_rt.h"

#include <string.h>

/* ---------------------------------------------------------------- profiler labels */

/* constants, conversions and index maps: not what a kernel is named after */
static int is_movement(pc_op op) {
  return pc_op_fuse_kind(op) == PC_FUSE_CONST || (pc_op_is_inline(op) && !pc_op_is_elementwise(op));
}

static void append_word(char *dst, size_t n, const char *w) {
  size_t len = strlen(dst);
  for (; *w && len + 1 < n; w++)
    if (*w != '"') dst[len++] = (*w == ' ' || *w == '\t' || *w == '\n') ? ':' : *w;
  dst[len] = 0;
}

static void label_prims(const kir_kernel *k, char *name, size_t n) {
  for (int i = 0; i < k->n_nodes; i++) {
    const char *pn = pc_prim(k->nodes[i]->op)->name;
    int seen = 0;
    for (int j = 0; j < i && !seen; j++) seen = k->nodes[j]->op == k->nodes[i]->op;
    if (seen) continue;
    if (*name) append_word(name, n, "+");
    append_word(name, n, pn);
  }
}

void kir_kernel_label(const kir_program *p, int idx, char *name, size_t name_len, char *origin, size_t origin_len) {
  const kir_kernel *k = &p->kernels[idx];
  name[0] = origin[0] = 0;
  if (k->kind == KK_CALL && !k->n_nodes) append_word(name, name_len, kir_call_name(k->call));
  label_prims(k, name, name_len);
  if (k->has_epilogue) label_prims(&p->kernels[k->epilogue], name, name_len);
  if (k->pair) append_word(name, name_len, "+depthwise"); /* the pair's second conv, timed with it */
  const pc_node *main = NULL;
  for (int i = 0; i < k->n_nodes && !main; i++)
    if (!is_movement(k->nodes[i]->op) && k->nodes[i]->origin) main = k->nodes[i];
  for (int i = 0; i < k->n_nodes && !main; i++)
    if (k->nodes[i]->origin) main = k->nodes[i];
  append_word(origin, origin_len, main && *main->origin ? main->origin : "-");
  if (!*name) append_word(name, name_len, "-");
}

int64_t kir_kernel_bytes(const kir_program *p, int idx) {
  char *used = pc_alloc(p->g, (size_t)p->n_bufs + 1);
  if (!used) return 0;
  memset(used, 0, (size_t)p->n_bufs + 1);
  const kir_kernel *k = &p->kernels[idx];
  kir_mark_kernel_bufs(k, used);
  if (k->has_epilogue) kir_mark_kernel_bufs(&p->kernels[k->epilogue], used);
  if (k->pair) { /* the second conv's buffers, not the map between them, which the pair never writes */
    const kir_kernel *b = &p->kernels[k->pair];
    kir_mark_kernel_bufs(b, used);
    if (b->has_epilogue) kir_mark_kernel_bufs(&p->kernels[b->epilogue], used);
    used[k->args[0]] = used[k->args[4]] = 0;
  }
  int64_t bytes = 0;
  for (int b = 0; b < p->n_bufs; b++)
    if (used[b]) bytes += p->bufs[b].nbytes;
  return bytes;
}

/* ---------------------------------------------------------------- printer */

static const char *place_names[] = {"input", "output", "const", "workspace"};

static void print_map(const kir_map *m, int n_loops, FILE *f) {
  fprintf(f, "[%lld", (long long)m->offset);
  for (int k = 0; k < n_loops; k++)
    if (m->stride[k]) fprintf(f, " %+lld*i%d", (long long)m->stride[k], k);
  fprintf(f, "]");
}

static void print_expr(const kir_expr *e, int n_loops, FILE *f) {
  switch (e->kind) { /* printing is the one place that walks every expression kind */
  case KE_LOAD: fprintf(f, "b%d", e->buf); print_map(&e->map, n_loops, f); break;
  case KE_CONST:
    if (pc_dtype_is_float(e->dtype)) fprintf(f, "%g", e->c);
    else fprintf(f, "%lld", (long long)e->ci);
    break;
  case KE_INDEX: fprintf(f, "index"); print_map(&e->map, n_loops, f); break;
  case KE_CONVERT:
    fprintf(f, "%s(", pc_dtype_name(e->dtype));
    print_expr(e->args[0], n_loops, f);
    fprintf(f, ")");
    break;
  case KE_PRIM:
    fprintf(f, "%s(", pc_prim(e->op)->name);
    for (int i = 0; i < e->n_args; i++) {
      if (i) fprintf(f, ", ");
      print_expr(e->args[i], n_loops, f);
    }
    fprintf(f, ")");
    break;
  }
}

/* an int8 call's B packed with a row's records (runtime/gemm/igemm_rows.def's prep), where it is */
static void print_i8_records(const kir_program *p, const kir_kernel *k, FILE *f) {
  for (int j = 0; j < p->n_packed; j++)
    if (p->packed[j].buf == k->args[2] && p->packed[j].i8_prep > 0)
      fprintf(f, " (B packed with the %s row's records of its blocks, made at compile time)",
              primc_igemm_row_name(p->packed[j].i8_prep - 1));
}

/* a conv_i8 call's requantization (codegen/kir_requant.c): its arithmetic, its stages and its outputs */
static void print_requant(const kir_kernel *k, FILE *f) {
  static const char *const outs[4] = {"u8", "s8", "f32 dequantized", "i32"};
  const int64_t *w = k->params + PRIMC_CONV_I8_RQ_AT;
  fprintf(f, " (requantized in the call in %s%s, writing", w[0] == PRIMC_CONV_I8_RQ_F64 ? "f64" : "f32",
          w[2] & PRIMC_CONV_I8_RQ_RES ? ", then a residual added and requantized in f32" : "");
  for (int i = 0; i < w[1] && i < 2; i++) {
    double kind;
    memcpy(&kind, &w[16 + 3 * i], sizeof kind);
    fprintf(f, "%s %s", i ? " and" : "", kind >= 0 && kind < 4 ? outs[(int)kind] : "?");
  }
  fprintf(f, ")");
}

/* "conv row NAME", with " (tuned)" when --autotune chose it and what the planner would have */
static void print_conv_row(const kir_program *p, const kir_kernel *k, FILE *f) {
  int row = (int)k->params[CONV_EPI_AT + CONV_EPI_ROW] - 1, heur = row;
  primc_conv2d c;
  fprintf(f, " conv row %s", primc_conv_row_name(row));
  int64_t st = k->params[CONV_EPI_AT + PRIMC_CONV_EPI_STORE];
  if (k->params[CONV_EPI_AT + CONV_EPI_ROW - 1] < 0)
    fprintf(f, " (computed weights packed by each call%s)", /* codegen/kir_flip.c */
            st & PRIMC_CONV_W_FLIPPED ? ", read flipped from the weights of the conv whose input gradient this is" : "");
  if (k->params[CONV_EPI_AT + CONV_EPI_ROW - 3] == PRIMC_CONV_W_BF16 &&
      k->params[CONV_EPI_AT + CONV_EPI_ROW - 2] == PRIMC_CONV_BF16_STREAM)
    fprintf(f, " (the program's bf16 weights outgrow this CPU's last-level cache: streamed from memory each run)");
  st &= PRIMC_CONV_X_PAIRS | PRIMC_CONV_Y_PAIRS | PRIMC_CONV_RES_PAIRS;
  if (st) /* codegen/kir_pairs.c */
    fprintf(f, " (bf16 channel pairs:%s%s%s)", st & PRIMC_CONV_X_PAIRS ? " x" : "", st & PRIMC_CONV_Y_PAIRS ? " y" : "",
            st & PRIMC_CONV_RES_PAIRS ? " residual" : "");
  if (primc_conv2d_of_params(k->params, &c) && pc_autotune_tuned(p->tune, &c, row, &heur))
    fprintf(f, " (tuned%s%s)", heur == row ? "" : "; the planner's: ", heur == row ? "" : primc_conv_row_name(heur));
}

static void print_kernel(const kir_program *p, int idx, FILE *f) {
  const kir_kernel *k = &p->kernels[idx];
  fprintf(f, "kernel k%d", idx);
  if (k->kind == KK_CALL) {
    fprintf(f, " = call %s(", kir_call_info(k->call)->symbol);
    for (int i = 0; i < k->n_args; i++) fprintf(f, "%sb%d", i ? ", " : "", k->args[i]);
    fprintf(f, ")");
    if (k->call == KC_conv && k->params[CONV_EPI_AT + CONV_EPI_ROW] > 0)
      print_conv_row(p, k, f);
    if (k->call == KC_dot_cols)
      fprintf(f, k->params[28] != PRIMC_WGRAD_WINOGRAD ? " (weight gradient as one GEMM over the columns read in place)"
                 : k->params[29] > 0 || k->params[31] > 0 || k->params[30] < k->params[9] + 2 || k->params[32] < k->params[10] + 2
                     ? " (weight gradient as Winograd F(2x2, 3x3): 16 GEMMs over the transformed tiles; the input read "
                       "unpadded where it lies)"
                     : " (weight gradient as Winograd F(2x2, 3x3): 16 GEMMs over the transformed tiles)");
    if (k->call == KC_dot_int)
      fprintf(f, " (i32 operands proven within [-256, 256]: exact on the bf16 GEMM in K chunks of %lld; bf16 row here %s)",
              (long long)k->params[12], primc_bgemm_row_name(primc_bgemm_row_active()));
    if (k->call == KC_dot_i8)
      fprintf(f, " (i32 dot on the int8 GEMM: B packed as s8 less an offset, A as u8 less a per-row offset at run time, "
                 "exact; int8 row here %s)",
              primc_igemm_row_name(primc_igemm_row_active()));
    if (k->call == KC_dot_i8 || k->call == KC_conv_i8) print_i8_records(p, k, f);
    if (k->call == KC_conv_i8 && k->params[CONV_EPI_AT + 2] == PRIMC_CONV_I8_X_I32_ANY)
      fprintf(f, " (i32 conv on the int8 GEMM: weights packed as s8 less an offset, input stored as i32 with no range "
                 "proven: each image's least value found at run time, an image spanning more than a byte exact from the "
                 "packed weights; int8 row here %s)",
              primc_igemm_row_name(primc_igemm_row_active()));
    else if (k->call == KC_conv_i8) {
      static const char *const xs[3] = {"i32", "u8", "s8"};
      int64_t xk = k->params[CONV_EPI_AT + 2];
      fprintf(f, " (i32 conv on the int8 GEMM: weights packed as s8 less an offset, input stored as %s less %lld, "
                 "less %lld again into a padded channels-last u8 copy, exact; int8 row here %s)",
              xk >= 0 && xk < 3 ? xs[xk] : "?", (long long)k->params[CONV_EPI_AT + 3], (long long)k->params[CONV_EPI_AT],
              primc_igemm_row_name(primc_igemm_row_active()));
    }
    if (k->call == KC_conv_i8 && k->params[PRIMC_CONV_I8_RQ_AT] != PRIMC_CONV_I8_RQ_NONE) print_requant(k, f);
    if (k->call == KC_conv && CONV_EPI_IS_RQ(k->params))
      fprintf(f, " (exact integer sums requantized in its epilogue in f32: roundeven((sum * scale + bias) / s) + zp, "
                 "clamped)");
    if (k->call == KC_dot_bf16)
      fprintf(f, " (%s: %s, f32 sums; B %s; bf16 row here %s)",
              p->g->autocast == PC_AUTOCAST_BF16 ? "autocast bf16" : k->params[12] == 3 ? "matmul precision high" : "matmul precision medium",
              k->params[12] == 3 ? "bf16 hi+lo operands" : "bf16 operands",
              k->params[11] > 0 ? "packed at compile time" : "packed per call",
              primc_bgemm_row_name(primc_bgemm_row_active()));
    if (k->has_epilogue) fprintf(f, " with epilogue k%d %s", k->epilogue, k->epi_in_call ? "in the call" : "per row block");
    if (k->pair) fprintf(f, ", then k%d in the same call (conv row %s)", k->pair, primc_conv_row_name(PRIMC_CONV_ROW_PAIR_DW));
    if (k->absorbed) fprintf(f, " (in k%d's call)", idx - 2);
    fprintf(f, "\n");
  } else {
    int epi = 0; /* an absorbed loop kernel is a call's epilogue, or work a call does its own way (not run) */
    for (int j = 0; k->absorbed && j < p->n_kernels && !epi; j++) epi = p->kernels[j].has_epilogue && p->kernels[j].epilogue == idx;
    fprintf(f, "%s loops(", !k->absorbed ? "" : epi ? " (epilogue)" : " (absorbed: not run)");
    for (int l = 0; l < k->n_loops; l++)
      fprintf(f, "%si%d<%lld%s", l ? ", " : "", l, (long long)k->extent[l], l < k->n_par ? "" : " reduce");
    fprintf(f, ")\n");
    for (int s = 0; s < k->n_stores; s++) {
      const kir_store *st = &k->stores[s];
      fprintf(f, "  b%d", st->buf);
      print_map(&st->map, k->n_loops, f);
      fprintf(f, " %s ", st->red == KR_NONE ? "=" : kir_red_name(st->red));
      print_expr(st->value, k->n_loops, f);
      fprintf(f, "\n");
    }
  }
  for (int i = 0; i < k->n_nodes; i++) {
    const pc_node *n = k->nodes[i];
    fprintf(f, "  from %%%d %s", n->out[0]->id, pc_prim(n->op)->name);
    if (n->group >= 0) fprintf(f, " (group %d)", n->group);
    fprintf(f, "%s%s\n", n->origin ? " <- " : "", n->origin ? n->origin : "");
  }
}

void kir_print(const kir_program *p, FILE *f) {
  fprintf(f, "workspace %lld bytes, weights %lld bytes\n", (long long)p->workspace_size, (long long)p->weights_size);
  if (p->g->bf16_f32_rows)
    fprintf(f, "no bf16 dot products on this CPU: contractions on the f32 rows%s\n",
            p->g->autocast == PC_AUTOCAST_BF16 ? ", their operands rounded to bf16" : "");
  for (int i = 0; i < p->n_bufs; i++) {
    const kir_buf *b = &p->bufs[i];
    fprintf(f, "buf b%d: %s %s", i, place_names[b->place], pc_dtype_name(b->dtype));
    if (b->v) {
      fprintf(f, "[");
      for (int d = 0; d < b->v->type.rank; d++) fprintf(f, "%s%lld", d ? "," : "", (long long)b->v->type.dims[d]);
      fprintf(f, "] %%%d", b->v->id);
    }
    if (b->place == KP_INPUT || b->place == KP_OUTPUT) fprintf(f, " #%d", b->index);
    else fprintf(f, " @%lld", (long long)b->offset);
    fprintf(f, " (%lld bytes)\n", (long long)b->nbytes);
  }
  for (int i = 0; i < p->n_kernels; i++) print_kernel(p, i, f);
}

