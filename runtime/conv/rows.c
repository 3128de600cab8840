/* runtime/conv/rows.c: the conv row table, its metadata, weight packing and checks, and the executor that runs a plan's row (or its fallback). */
#include "runtime/conv/conv.h"

#include <stdlib.h>
#include <string.h>

const cv_row primc_cv_rows[PRIMC_CONV_ROW_COUNT] = {
#define PRIMC_CONV_ROW(id, nm, cl, is, lay, nd, fb, fit, scr, rn)                                             \
  [PRIMC_CONV_ROW_##id] = {.name = nm, .cls = PRIMC_CONV_CLASS_##cl, .isa = PRIMC_ISA_##is, .layout = PRIMC_CONV_W_##lay, \
                           .needs = (nd), .fallback = PRIMC_CONV_ROW_##fb, .fits = fit, .scratch = scr, .run = rn},
#include "runtime/conv/conv_rows.def"
#undef PRIMC_CONV_ROW
};

static int row_ok(int row) { return row >= 0 && row < PRIMC_CONV_ROW_COUNT; }

const char *primc_conv_row_name(int row) { return row_ok(row) ? primc_cv_rows[row].name : NULL; }
int primc_conv_row_class(int row) { return row_ok(row) ? primc_cv_rows[row].cls : -1; }
int primc_conv_row_isa(int row) { return row_ok(row) ? primc_cv_rows[row].isa : -1; }
int primc_conv_row_layout(int row) { return row_ok(row) ? primc_cv_rows[row].layout : -1; }
int primc_conv_row_fallback(int row) { return row_ok(row) ? primc_cv_rows[row].fallback : -1; }

int primc_conv_row_find(const char *name) {
  for (int r = 0; name && r < PRIMC_CONV_ROW_COUNT; r++)
    if (!strcmp(primc_cv_rows[r].name, name)) return r;
  return -1;
}

/* p's w_* fields as weights stored in layout (tile height mr for STRIPS and WINOGRAD) */
void primc_conv2d_set_layout(primc_conv2d *p, int layout, int mr) {
  p->w_packed_mr = layout == PRIMC_CONV_W_STRIPS || layout == PRIMC_CONV_W_WINOGRAD ? mr : 0;
  p->w_packed_panels = layout == PRIMC_CONV_W_PANELS;
  p->w_winograd = layout == PRIMC_CONV_W_WINOGRAD;
  p->w_lanes = layout == PRIMC_CONV_W_LANES;
  p->w_bf16 = layout != PRIMC_CONV_W_BF16 ? 0 : mr == PRIMC_CONV_BF16_STREAM ? PRIMC_CONV_BF16_STREAM : 1;
}

int primc_conv_row_fits(int row, const primc_conv2d *p, const primc_conv2d *next) {
  if (!row_ok(row) || !p || !primc_cv_valid(p)) return 0;
  primc_conv2d q = *p;
  primc_conv2d_set_layout(&q, primc_cv_rows[row].layout, primc_sgemm_mr());
  return primc_cv_rows[row].fits(&q, next);
}

/* ---------------------------------------------------------------- weights */

size_t primc_conv2d_packed_weight_bytes(const primc_conv2d *p, int layout) {
  if (!p || !primc_cv_valid(p)) return 0;
  int64_t og = p->o / p->groups, kk = (p->c / p->groups) * p->kh * p->kw;
  if (layout == PRIMC_CONV_W_PANELS) return (size_t)p->groups * primc_cv_panels_stride(og, kk);
  if (layout == PRIMC_CONV_W_WINOGRAD) return primc_conv2d_winograd_bytes(p);
  if (layout == PRIMC_CONV_W_LANES) return primc_conv2d_lanes_bytes(p);
  if (layout == PRIMC_CONV_W_BF16) return (size_t)p->groups * primc_cv_bf16_stride(og, primc_cv_bf16_k(p));
  return (size_t)(p->o * kk) * sizeof(float);
}

size_t primc_conv_plan_weight_bytes(const primc_conv2d *p, const primc_conv_plan *plan) {
  return plan ? primc_conv2d_packed_weight_bytes(p, plan->layout) : 0;
}

int primc_conv_plan_pack(const primc_conv2d *p, const primc_conv_plan *plan, const float *w, void *dst) {
  if (!p || !plan || !w || !dst || !primc_cv_valid(p)) return PRIMC_ERR_ARG;
  int64_t og = p->o / p->groups, kk = (p->c / p->groups) * p->kh * p->kw;
  int st = PRIMC_OK;
  switch (plan->layout) {
  case PRIMC_CONV_W_PLAIN: memcpy(dst, w, (size_t)(p->o * kk) * sizeof(float)); break;
  case PRIMC_CONV_W_STRIPS: /* each group's [og][kk] at its plain offset */
    for (int64_t g = 0; g < p->groups && st == PRIMC_OK; g++)
      st = primc_sgemm_pack_a(og, kk, w + g * og * kk, kk, plan->tile_mr, (float *)dst + g * og * kk);
    break;
  case PRIMC_CONV_W_PANELS: /* W^T panels per group, primc_cv_panels_stride bytes apart */
    for (int64_t g = 0; g < p->groups && st == PRIMC_OK; g++)
      st = primc_sgemm_pack_b(1, og, kk, w + g * og * kk, kk, (char *)dst + g * primc_cv_panels_stride(og, kk));
    break;
  case PRIMC_CONV_W_WINOGRAD: st = primc_conv2d_pack_winograd(p, w, plan->tile_mr, dst); break;
  case PRIMC_CONV_W_LANES: st = primc_conv2d_pack_lanes(p, w, dst); break;
  case PRIMC_CONV_W_BF16: st = primc_cv_bf16_pack(p, w, dst); break;
  default: st = PRIMC_ERR_ARG;
  }
  return st;
}

int primc_conv_plan_pack_flipped(const primc_conv2d *p, const primc_conv_plan *plan, const float *wf, void *dst) {
  if (!p || !plan) return PRIMC_ERR_ARG;
  if (plan->layout == PRIMC_CONV_W_LANES) return primc_conv2d_pack_lanes_flipped(p, wf, dst);
  if (plan->layout == PRIMC_CONV_W_WINOGRAD) return primc_conv2d_pack_winograd_flipped(p, wf, plan->tile_mr, dst);
  return PRIMC_ERR_ARG;
}

int64_t primc_conv_plan_pack_offset(const primc_conv2d *p, const primc_conv_plan *plan) {
  return (primc_conv_plan_scratch_floats(p, plan) * (int64_t)sizeof(float) + 63) / 64 * 64;
}

int primc_conv2d_check_weights(const primc_conv2d *p, const void *w, size_t bytes) {
  if (!p || !primc_cv_valid(p) || !w) return PRIMC_ERR_WEIGHTS;
  size_t stride;
  if (p->w_packed_panels) return primc_cv_panels_check(p, w, bytes, &stride);
  if (p->w_bf16) return primc_cv_bf16_check(p, w, bytes);
  int layout = p->w_winograd ? PRIMC_CONV_W_WINOGRAD : p->w_lanes ? PRIMC_CONV_W_LANES
             : p->w_packed_mr ? PRIMC_CONV_W_STRIPS : PRIMC_CONV_W_PLAIN;
  return primc_conv2d_packed_weight_bytes(p, layout) <= bytes ? PRIMC_OK : PRIMC_ERR_WEIGHTS;
}

/* ---------------------------------------------------------------- scratch */

int64_t primc_conv_plan_scratch_floats(const primc_conv2d *p, const primc_conv_plan *plan) {
  if (!p || !plan || !row_ok(plan->row) || !primc_cv_valid(p)) return 0;
  return primc_cv_rows[plan->row].scratch(p);
}

/* the most any row that can run p uses (callers that do not plan) */
int64_t primc_conv2d_scratch_floats(const primc_conv2d *p) {
  int64_t need = 0;
  for (int r = 0; p && r < PRIMC_CONV_ROW_COUNT; r++)
    if (primc_cv_rows[r].cls != PRIMC_CONV_CLASS_PAIR && primc_conv_row_fits(r, p, NULL) &&
        primc_cv_rows[r].scratch(p) > need)
      need = primc_cv_rows[r].scratch(p);
  return need;
}

/* ---------------------------------------------------------------- the executor */

/* the row the last call ran (tests), in the process, not per thread: _Thread_local in a library that compiled models
 * link as shared objects left LeakSanitizer reading a dlclosed object's TLS block (test_conv_i8's many libraries) */
static int last_row = -1;
static int rq_after; /* tests: every row's act RQ by the executor */

int primc_conv_last_row(void) { return __atomic_load_n(&last_row, __ATOMIC_RELAXED); }
void primc_conv_rq_force_after(int on) { rq_after = on; }

int primc_conv_run(const primc_conv2d *p, const primc_conv_plan *plan, const float *x, const void *w,
                   const primc_conv_epi *e, float *y, float *spare, float *col) {
  if (!p || !plan || !row_ok(plan->row) || !primc_cv_valid(p) || primc_cv_rows[plan->row].cls == PRIMC_CONV_CLASS_PAIR)
    return PRIMC_ERR_ARG;
  primc_conv_epi none = {.lo = -__builtin_inff(), .hi = __builtin_inff()};
  if (!e) e = &none;
  int64_t oh, ow;
  primc_conv2d_out_hw(p, &oh, &ow);
  if (p->store && (plan->row != PRIMC_CONV_ROW_BF16 || !primc_conv_pairs_in_place(p)))
    return primc_cv_run_unpaired(p, plan, x, w, e, y, spare, col);
  /* floats each map spans (a map of pairs: its words) */
  int64_t ny = p->store & PRIMC_CONV_Y_PAIRS ? primc_conv_pairs_bytes(p->n, p->o, oh, ow) / 4 : p->n * p->o * oh * ow;
  int64_t nx = p->store & PRIMC_CONV_X_PAIRS ? primc_conv_pairs_bytes(p->n, p->c, p->h, p->w) / 4 : p->n * p->c * p->h * p->w;
  /* y over x (in place, or partly), or partly over the residual: the rows write y by images, planes or bands
   * while later ones still read those, so the result is made in spare and copied to y at the end */
  int64_t nr = p->store & PRIMC_CONV_RES_PAIRS ? primc_conv_pairs_bytes(p->n, p->o, oh, ow) / 4 : p->n * p->o * oh * ow;
  /* a residual that is y exactly is read before y is written, element by element: in one layout only */
  int res_is_y = e->res == y && !(p->store & PRIMC_CONV_Y_PAIRS) == !(p->store & PRIMC_CONV_RES_PAIRS);
  float *out = y;
  if (y && (cv_overlaps(y, ny, x, nx) || (e->res && !res_is_y && cv_overlaps(y, ny, e->res, nr)))) {
    if (!spare || cv_overlaps(spare, ny, y, ny)) return PRIMC_ERR_ARG;
    y = spare, spare = NULL;
  }
  float *acc = e->res == y && y ? spare : y; /* the sums: y itself unless y is the residual */
  if (!acc || cv_overlaps(acc, ny, x, nx) || (e->res && cv_overlaps(acc, ny, e->res, nr))) return PRIMC_ERR_ARG;
  primc_conv2d q = *p;
  primc_conv2d_set_layout(&q, plan->layout, plan->tile_mr);
  /* the planned row, or where its ISA, buffers or fit are missing its fallback: never a ranking again */
  int row = plan->row;
  for (int hops = 0;; hops++) {
    const cv_row *r = &primc_cv_rows[row];
    if (primc_isa_covers(primc_sgemm_isa(), r->isa) && (!(r->needs & CV_NEED_COL) || col) &&
        r->fits(&q, NULL))
      break;
    if (r->fallback == row || hops >= PRIMC_CONV_ROW_COUNT) return PRIMC_ERR_ARG;
    row = r->fallback;
  }
  __atomic_store_n(&last_row, row, __ATOMIC_RELAXED);
  /* a row whose epilogues do not requantize makes the sums, requantized here after it (act RQ has no residual:
   * acc is y) */
  const primc_conv_epi *rq = e->act == PRIMC_ACT_RQ && (rq_after || !(primc_cv_rows[row].needs & CV_EPI_RQ)) ? e : NULL;
  cv_call c = {&q, oh, ow, x, w, rq ? &none : e, y, acc, col, NULL, NULL, NULL};
  int st = primc_cv_rows[row].run(&c);
  if (st == PRIMC_OK && rq) primc_conv_epi_apply(rq, p->n, p->o, oh * ow, y, y, 1);
  if (st == PRIMC_OK && out != y) memcpy(out, y, (size_t)ny * sizeof(float));
  return st;
}

/* ---------------------------------------------------------------- callers that do not plan ahead */

static int layout_of(const primc_conv2d *p) {
  return p->w_bf16 ? PRIMC_CONV_W_BF16 : p->w_winograd ? PRIMC_CONV_W_WINOGRAD : p->w_lanes ? PRIMC_CONV_W_LANES
       : p->w_packed_panels ? PRIMC_CONV_W_PANELS : p->w_packed_mr ? PRIMC_CONV_W_STRIPS : PRIMC_CONV_W_PLAIN;
}

int primc_conv2d_weight_layout(const primc_conv2d *p) {
  primc_conv_plan_opts o = {.packable = 1, .tile_mr = primc_sgemm_mr(), .has_scratch = 1, .weights_once = 1};
  primc_conv_plan plan;
  return p && primc_conv_plan_make(p, &o, &plan) == PRIMC_OK ? plan.layout : PRIMC_CONV_W_PLAIN;
}

/* plans for the weights as p's w_* fields say they are stored, then runs the plan */
int primc_conv2d_f32_epi(const primc_conv2d *p, const float *x, const float *w, const primc_conv_epi *e, float *y,
                         float *spare, float *col) {
  if (!p || !primc_cv_valid(p)) return PRIMC_ERR_ARG;
  primc_conv_plan_opts o = {.layout = layout_of(p), .tile_mr = p->w_packed_mr, .has_scratch = col != NULL,
                            .bf16 = p->w_bf16};
  primc_conv_plan plan;
  if (primc_conv_plan_make(p, &o, &plan) != PRIMC_OK) return PRIMC_ERR_ARG;
  return primc_conv_run(p, &plan, x, w, e, y, spare, col);
}

int primc_conv2d_f32(const primc_conv2d *p, const float *x, const float *w, const float *bias, float *y) {
  primc_conv_epi e = {.bias = bias, .bias_stride = 1, .lo = p && p->relu ? 0.0f : -__builtin_inff(), .hi = __builtin_inff()};
  return primc_conv2d_f32_epi(p, x, w, &e, y, NULL, NULL);
}
