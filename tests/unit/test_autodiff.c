/* tests/unit/test_autodiff.c: every row of passes/transforms.def, reverse mode (pc_grad) and forward mode
 * (pc_jvp), against central finite differences of the interpreter in f64. Elementwise prims get a case
 * generated from ir/prims.def; the others have one or more cases below, and a rule with no case fails the
 * coverage test. Then the transforms composed: the jvp of a gradient against differences of gradients. */
#include "passes/autodiff.h"
#include "tests/test.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct grad_case {
  const char *prim; /* the prim the case covers */
  const char *text; /* a graph whose float inputs are differentiated */
  int positive;     /* float inputs drawn from [0.5, 2] (else +-[0.2, 1.5]) */
  const char *zeros; /* flat indices of input 0 set to 0, comma separated, or NULL */
  double eps, tol;   /* 0: 1e-6 and 1e-6 */
} grad_case;

static const grad_case cases[] = {
    {"where", "graph(%c : bool[2,3], %a : f64[2,3], %b : f64[2,3]):\n  %y : f64[2,3] = where(%c, %a, %b)\n"
              "  return (%y)\n", 0, NULL, 0, 0},
    {"convert_element_type", "graph(%x : f64[2,3]):\n  %t : f32[2,3] = convert_element_type(%x, dtype=f32)\n"
                             "  %y : f64[2,3] = convert_element_type(%t, dtype=f64)\n  return (%y)\n", 0, NULL, 1e-2, 1e-4},
    {"broadcast_in_dim", "graph(%x : f64[3,1]):\n  %y : f64[2,3,4] = broadcast_in_dim(%x, shape=[2,3,4], dims=[1,2])\n"
                         "  return (%y)\n", 0, NULL, 0, 0},
    {"reshape", "graph(%x : f64[2,3]):\n  %y : f64[3,2] = reshape(%x, shape=[3,2])\n  return (%y)\n", 0, NULL, 0, 0},
    {"transpose", "graph(%x : f64[2,3,4]):\n  %y : f64[4,2,3] = transpose(%x, perm=[2,0,1])\n  return (%y)\n", 0, NULL, 0, 0},
    {"slice", "graph(%x : f64[5,6]):\n  %y : f64[2,3] = slice(%x, start=[1,0], limit=[5,5], stride=[2,2])\n"
              "  return (%y)\n", 0, NULL, 0, 0},
    {"pad", "graph(%x : f64[3,4]):\n  %y : f64[5,5] = pad(%x, low=[1,-1], high=[-1,2], interior=[1,0], value=0.5)\n"
            "  return (%y)\n", 0, NULL, 0, 0},
    {"concatenate", "graph(%a : f64[2,3], %b : f64[2,2]):\n  %y : f64[2,5] = concatenate(%a, %b, axis=1)\n"
                    "  return (%y)\n", 0, NULL, 0, 0},
    {"rev", "graph(%x : f64[3,4]):\n  %y : f64[3,4] = rev(%x, dims=[1])\n  return (%y)\n", 0, NULL, 0, 0},
    {"gather", "graph(%x : f64[4,3]):\n  %i : i64[2,3] = constant(value=[3, 0, 1, 3, 2, 1])\n"
               "  %y : f64[2,3] = gather(%x, %i, axis=0)\n  return (%y)\n", 0, NULL, 0, 0},
    {"scatter", "graph(%x : f64[4,3], %u : f64[2,3]):\n  %i : i64[2,3] = constant(value=[3, 0, 1, 2, 2, 0])\n"
                "  %y : f64[4,3] = scatter(%x, %i, %u, axis=0, reduce=\"none\")\n  return (%y)\n", 0, NULL, 0, 0},
    {"scatter", "graph(%x : f64[4,3], %u : f64[2,3]):\n  %i : i64[2,3] = constant(value=[3, 0, 1, 3, 0, 1])\n"
                "  %y : f64[4,3] = scatter(%x, %i, %u, axis=0, reduce=\"add\")\n  return (%y)\n", 0, NULL, 0, 0},
    {"reduce_sum", "graph(%x : f64[2,3,4]):\n  %y : f64[3] = reduce_sum(%x, axes=[0,2])\n  return (%y)\n", 0, NULL, 0, 0},
    {"reduce_prod", "graph(%x : f64[3,4]):\n  %y : f64[3] = reduce_prod(%x, axes=[1])\n  return (%y)\n", 0, "0,4,5", 0, 0},
    {"reduce_max", "graph(%x : f64[3,4]):\n  %y : f64[3] = reduce_max(%x, axes=[1])\n  return (%y)\n", 0, NULL, 0, 0},
    {"reduce_min", "graph(%x : f64[3,4]):\n  %y : f64[4] = reduce_min(%x, axes=[0])\n  return (%y)\n", 0, NULL, 0, 0},
    {"cumsum", "graph(%x : f64[3,4]):\n  %y : f64[3,4] = cumsum(%x, axis=1, exclusive=1, reverse=0)\n"
               "  return (%y)\n", 0, NULL, 0, 0},
    {"cumsum", "graph(%x : f64[3,4]):\n  %y : f64[3,4] = cumsum(%x, axis=0, exclusive=0, reverse=1)\n"
               "  return (%y)\n", 0, NULL, 0, 0},
    {"dot_general", "graph(%a : f64[2,3], %b : f64[3,4]):\n  %y : f64[2,4] = dot_general(%a, %b, lhs_contract=[1], "
                    "rhs_contract=[0], lhs_batch=[], rhs_batch=[])\n  return (%y)\n", 0, NULL, 0, 0},
    {"dot_general", "graph(%a : f64[2,3,5], %b : f64[5,2,4]):\n  %y : f64[2,3,4] = dot_general(%a, %b, "
                    "lhs_contract=[2], rhs_contract=[0], lhs_batch=[0], rhs_batch=[1])\n  return (%y)\n", 0, NULL, 0, 0},
    {"dot_general", "graph(%a : f64[3,2,4], %b : f64[4,5,3]):\n  %y : f64[2,5] = dot_general(%a, %b, "
                    "lhs_contract=[0,2], rhs_contract=[2,0], lhs_batch=[], rhs_batch=[])\n  return (%y)\n", 0, NULL, 0, 0},
    {"conv", "graph(%x : f64[2,4,5,6], %w : f64[6,2,3,2]):\n  %y : f64[2,6,2,5] = conv(%x, %w, stride=[2,1], "
             "pad_lo=[1,0], pad_hi=[0,1], dilation=[1,2], lhs_dilation=[1,1], groups=2)\n  return (%y)\n", 0, NULL, 0, 0},
    {"conv", "graph(%x : f64[1,3,7], %w : f64[3,1,3]):\n  %y : f64[1,3,4] = conv(%x, %w, stride=[2], pad_lo=[1], "
             "pad_hi=[1], dilation=[1], lhs_dilation=[1], groups=3)\n  return (%y)\n", 0, NULL, 0, 0},
    {"conv", "graph(%x : f64[1,2,4,3], %w : f64[3,2,3,3]):\n  %y : f64[1,3,8,1] = conv(%x, %w, stride=[1,1], "
             "pad_lo=[2,1], pad_hi=[1,-1], dilation=[1,1], lhs_dilation=[2,1], groups=1)\n  return (%y)\n", 0, NULL, 0, 0},
    {"conv", "graph(%x : f64[2,3,6,5], %w : f64[4,3,3,2]):\n  %y : f64[2,4,3,4] = conv(%x, %w, stride=[2,1], "
             "pad_lo=[1,0], pad_hi=[0,1], dilation=[1,2], lhs_dilation=[1,1], groups=1)\n  return (%y)\n", 0, NULL, 0, 0},
    {"conv", "graph(%x : f64[1,2,7], %w : f64[3,2,3]):\n  %y : f64[1,3,2] = conv(%x, %w, stride=[2], pad_lo=[0], "
             "pad_hi=[-1], dilation=[1], lhs_dilation=[1], groups=1)\n  return (%y)\n", 0, NULL, 0, 0},
    {"sort", "graph(%x : f64[3,4]):\n  %v : f64[3,4], %i : i64[3,4] = sort(%x, axis=1, descending=0)\n"
             "  return (%v, %i)\n", 0, NULL, 0, 0},
    {"topk", "graph(%x : f64[3,5]):\n  %v : f64[3,2], %i : i64[3,2] = topk(%x, k=2, axis=1, largest=1)\n"
             "  return (%v, %i)\n", 0, NULL, 0, 0},
};

/* prims with no derivative, batched only */
static const grad_case vmap_cases[] = {
    {"bitcast", "graph(%x : f64[2,3]):\n  %y : f32[2,3,2] = bitcast(%x, dtype=f32)\n  return (%y)\n", 0, NULL, 0, 0},
    {"argmax", "graph(%x : f64[2,3]):\n  %y : i64[2] = argmax(%x, axis=1, last=0)\n  return (%y)\n", 0, NULL, 0, 0},
    {"argmin", "graph(%x : f64[2,3]):\n  %y : i64[3] = argmin(%x, axis=0, last=1)\n  return (%y)\n", 0, NULL, 0, 0},
    {"fft", "graph(%x : f32[2,8]):\n  %y : c64[2,5] = fft(%x, type=\"rfft\", length=8)\n  return (%y)\n", 0, NULL, 0, 0},
};

/* elementwise prims whose operands must stay positive (logs, roots, pow's base) */
static int wants_positive(pc_op op) {
  return op == PC_OP_log || op == PC_OP_sqrt || op == PC_OP_rsqrt || op == PC_OP_pow || op == PC_OP_log1p;
}

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static double uniform(void) {
  rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
  return (double)(rng_state >> 11) * (1.0 / 9007199254740992.0);
}

static void fill(pc_tensor *t, const pc_type *ty, int positive, const char *zeros) {
  memset(t, 0, sizeof *t);
  t->dtype = ty->dtype, t->rank = ty->rank;
  memcpy(t->dims, ty->dims, sizeof t->dims);
  int64_t n = pc_type_numel(ty);
  t->data = calloc((size_t)(n ? n : 1), pc_dtype_size(ty->dtype));
  for (int64_t i = 0; i < n; i++) {
    double u = uniform();
    double v = positive ? 0.5 + 1.5 * u : (uniform() < 0.5 ? -1 : 1) * (0.2 + 1.3 * u);
    if (ty->dtype == PC_bool) v = uniform() < 0.5;
    pc_elem_store(ty->dtype, t->data, i, v);
  }
  for (const char *z = zeros; z && *z; z = strchr(z, ',') ? strchr(z, ',') + 1 : "") pc_elem_store(ty->dtype, t->data, atoi(z), 0);
}

/* sum over float outputs of <ct, y> at the given inputs; NAN when the interpreter fails */
static double objective(pc_graph *g, pc_tensor *ins, const pc_tensor *cts) {
  pc_tensor outs[4];
  memset(outs, 0, sizeof outs);
  if (g->n_outputs > 4 || pc_interp(g, ins, g->n_inputs, outs, g->n_outputs) != PC_OK) return NAN;
  double s = 0;
  for (int j = 0, k = 0; j < g->n_outputs; j++) {
    if (pc_dtype_is_float(outs[j].dtype)) {
      for (int64_t i = 0; i < pc_tensor_numel(&outs[j]); i++)
        s += pc_elem_f64(outs[j].dtype, outs[j].data, i) * pc_elem_f64(cts[k].dtype, cts[k].data, i);
      k++;
    }
    pc_tensor_free(&outs[j]);
  }
  return s;
}

/* the gradient graph of text against finite differences; 1 when they agree */
static int check_case(const grad_case *c, const char *tag) {
  pc_graph *g = pc_graph_parse(c->text, strlen(c->text), tag, NULL);
  pc_graph *d = pc_graph_parse(c->text, strlen(c->text), tag, NULL);
  int ok = CHECK_MSG(g && d && !g->status && !d->status, "%s: %s", tag, g ? pc_error(g) : "no graph");
  const char *wrt[8];
  int nw = 0, ni = ok ? g->n_inputs : 0;
  for (int i = 0; i < ni && nw < 8; i++)
    if (pc_dtype_is_float(g->inputs[i]->type.dtype)) wrt[nw++] = g->inputs[i]->name;
  pc_grad_opts o = {wrt, nw};
  if (ok) ok = CHECK_MSG(pc_grad(d, &o) == PC_OK, "%s: grad: %s", tag, pc_error(d));
  if (ok) ok = CHECK_MSG(pc_verify(d) == PC_OK, "%s: verify: %s", tag, pc_error(d));
  pc_tensor ins[16], outs[16];
  int nd_in = ok ? d->n_inputs : 0, nd_out = ok ? d->n_outputs : 0;
  if (ok) ok = CHECK(nd_in <= 16 && nd_out <= 16);
  for (int i = 0; ok && i < nd_in; i++)
    fill(&ins[i], &d->inputs[i]->type, i < ni && c->positive, i == 0 ? c->zeros : NULL);
  memset(outs, 0, sizeof outs);
  if (ok) ok = CHECK_MSG(pc_interp(d, ins, nd_in, outs, nd_out) == PC_OK, "%s: interp: %s", tag, pc_error(d));
  double eps = c->eps ? c->eps : 1e-6, tol = c->tol ? c->tol : 1e-6;
  for (int w = 0, k = 0; ok && w < ni; w++) {
    if (!pc_dtype_is_float(g->inputs[w]->type.dtype)) continue;
    const pc_tensor *grad = &outs[g->n_outputs + k++];
    pc_tensor *x = &ins[w];
    for (int64_t i = 0; ok && i < pc_tensor_numel(x); i++) {
      double x0 = pc_elem_f64(x->dtype, x->data, i);
      pc_elem_store(x->dtype, x->data, i, x0 + eps);
      double up = objective(g, ins, ins + ni);
      pc_elem_store(x->dtype, x->data, i, x0 - eps);
      double down = objective(g, ins, ins + ni);
      pc_elem_store(x->dtype, x->data, i, x0);
      double fd = (up - down) / (2 * eps), an = pc_elem_f64(grad->dtype, grad->data, i);
      ok = CHECK_MSG(fabs(fd - an) <= tol * (1 + fabs(fd)), "%s: d/d%s[%lld]: rule %.9g, finite differences %.9g",
                     tag, g->inputs[w]->name, (long long)i, an, fd);
    }
  }
  for (int i = 0; i < nd_in; i++) free(ins[i].data);
  for (int i = 0; i < nd_out; i++) pc_tensor_free(&outs[i]);
  pc_graph_free(g), pc_graph_free(d);
  return ok;
}

/* the forward-mode graph of text against finite differences along random tangents; 1 when they agree */
static int check_jvp(const grad_case *c, const char *tag) {
  pc_graph *g = pc_graph_parse(c->text, strlen(c->text), tag, NULL);
  pc_graph *d = pc_graph_parse(c->text, strlen(c->text), tag, NULL);
  int ok = CHECK_MSG(g && d && !g->status && !d->status, "%s: %s", tag, g ? pc_error(g) : "no graph");
  if (ok) ok = CHECK_MSG(pc_jvp(d, NULL) == PC_OK, "%s: jvp: %s", tag, pc_error(d));
  if (ok) ok = CHECK_MSG(pc_verify(d) == PC_OK, "%s: verify: %s", tag, pc_error(d));
  int ni = ok ? g->n_inputs : 0, nd_in = ok ? d->n_inputs : 0, nd_out = ok ? d->n_outputs : 0;
  pc_tensor ins[16], outs[16], plus[16], minus[16];
  if (ok) ok = CHECK(nd_in <= 16 && nd_out <= 16 && g->n_outputs <= 4);
  for (int i = 0; ok && i < nd_in; i++)
    fill(&ins[i], &d->inputs[i]->type, i < ni && c->positive, i == 0 ? c->zeros : NULL);
  memset(outs, 0, sizeof outs), memset(plus, 0, sizeof plus), memset(minus, 0, sizeof minus);
  if (ok) ok = CHECK_MSG(pc_interp(d, ins, nd_in, outs, nd_out) == PC_OK, "%s: interp: %s", tag, pc_error(d));
  double eps = c->eps ? c->eps : 1e-6, tol = c->tol ? c->tol : 1e-6;
  /* x +- eps t for every float input, t the tangent input that follows the inputs in order */
  for (int s = 0; ok && s < 2; s++) {
    pc_tensor *at = s ? minus : plus;
    for (int i = 0, k = ni; i < ni; i++) {
      at[i] = ins[i];
      if (!pc_dtype_is_float(ins[i].dtype)) continue;
      size_t bytes = pc_tensor_nbytes(&ins[i]);
      at[i].data = malloc(bytes + 1);
      for (int64_t e = 0; at[i].data && e < pc_tensor_numel(&ins[i]); e++)
        pc_elem_store(ins[i].dtype, at[i].data, e, pc_elem_f64(ins[i].dtype, ins[i].data, e) +
                      (s ? -eps : eps) * pc_elem_f64(ins[k].dtype, ins[k].data, e));
      k++;
    }
  }
  pc_tensor yp[4], ym[4];
  memset(yp, 0, sizeof yp), memset(ym, 0, sizeof ym);
  if (ok) ok = CHECK(pc_interp(g, plus, ni, yp, g->n_outputs) == PC_OK && pc_interp(g, minus, ni, ym, g->n_outputs) == PC_OK);
  for (int j = 0, k = g->n_outputs; ok && j < g->n_outputs; j++) {
    if (!pc_dtype_is_float(yp[j].dtype)) continue;
    const pc_tensor *tan = &outs[k++];
    for (int64_t e = 0; ok && e < pc_tensor_numel(&yp[j]); e++) {
      double fd = (pc_elem_f64(yp[j].dtype, yp[j].data, e) - pc_elem_f64(ym[j].dtype, ym[j].data, e)) / (2 * eps);
      double an = pc_elem_f64(tan->dtype, tan->data, e);
      ok = CHECK_MSG(fabs(fd - an) <= tol * (1 + fabs(fd)), "%s: tangent of output %d [%lld]: rule %.9g, finite "
                     "differences %.9g", tag, j, (long long)e, an, fd);
    }
  }
  for (int i = 0; i < ni; i++) {
    if (pc_dtype_is_float(ins[i].dtype)) free(plus[i].data), free(minus[i].data);
  }
  for (int j = 0; ok && j < g->n_outputs; j++) pc_tensor_free(&yp[j]), pc_tensor_free(&ym[j]);
  for (int i = 0; i < nd_in; i++) free(ins[i].data);
  for (int i = 0; i < nd_out; i++) pc_tensor_free(&outs[i]);
  pc_graph_free(g), pc_graph_free(d);
  return ok;
}

/* the batched graph (pc_vmap with B = 3 over the inputs in mask) against the graph run on each batch entry */
static int check_vmap(const grad_case *c, const char *tag, unsigned mask) {
  enum { B = 3 };
  pc_graph *g = pc_graph_parse(c->text, strlen(c->text), tag, NULL);
  pc_graph *d = pc_graph_parse(c->text, strlen(c->text), tag, NULL);
  int ok = CHECK_MSG(g && d && !g->status && !d->status, "%s: %s", tag, g ? pc_error(g) : "no graph");
  const char *names[8];
  int nn = 0, ni = ok ? g->n_inputs : 0;
  for (int i = 0; i < ni && i < 8; i++)
    if (mask & (1u << i)) names[nn++] = g->inputs[i]->name;
  if (!nn) {
    pc_graph_free(g), pc_graph_free(d);
    return ok;
  }
  pc_vmap_opts o = {names, nn, B};
  if (ok) ok = CHECK_MSG(pc_vmap(d, &o) == PC_OK, "%s: vmap: %s", tag, pc_error(d));
  if (ok) ok = CHECK_MSG(pc_verify(d) == PC_OK, "%s: verify: %s", tag, pc_error(d));
  int no = ok ? g->n_outputs : 0;
  if (ok) ok = CHECK(ni <= 8 && no <= 4 && d->n_outputs == no);
  pc_tensor ins[8], outs[4], one[8], ref[4];
  memset(outs, 0, sizeof outs);
  for (int i = 0; ok && i < ni; i++) fill(&ins[i], &d->inputs[i]->type, c->positive, i == 0 ? c->zeros : NULL);
  if (ok) ok = CHECK_MSG(pc_interp(d, ins, ni, outs, no) == PC_OK, "%s: interp: %s", tag, pc_error(d));
  for (int k = 0; ok && k < B; k++) {
    for (int i = 0; i < ni; i++) { /* batch entry k of the batched inputs */
      one[i] = ins[i];
      if (!(mask & (1u << i))) continue;
      one[i].rank--;
      memmove(one[i].dims, one[i].dims + 1, sizeof one[i].dims[0] * (size_t)one[i].rank);
      one[i].data = (char *)ins[i].data + (size_t)k * pc_tensor_nbytes(&one[i]);
    }
    memset(ref, 0, sizeof ref);
    ok = CHECK_MSG(pc_interp(g, one, ni, ref, no) == PC_OK, "%s: interp entry %d: %s", tag, k, pc_error(g));
    for (int j = 0; ok && j < no; j++) {
      int64_t m = pc_tensor_numel(&ref[j]);
      ok = CHECK_MSG(outs[j].rank == ref[j].rank + 1 && outs[j].dims[0] == B, "%s: output %d is not batched", tag, j);
      for (int64_t e = 0; ok && e < m; e++) {
        double a = pc_elem_f64(outs[j].dtype, outs[j].data, k * m + e), r = pc_elem_f64(ref[j].dtype, ref[j].data, e);
        ok = CHECK_MSG(a == r || fabs(a - r) <= 1e-12 * (1 + fabs(r)), "%s (inputs %#x): entry %d output %d [%lld]: "
                       "batched %.17g, alone %.17g", tag, mask, k, j, (long long)e, a, r);
      }
    }
    for (int j = 0; j < no; j++) pc_tensor_free(&ref[j]);
  }
  for (int i = 0; ok && i < ni; i++) free(ins[i].data);
  for (int j = 0; j < no; j++) pc_tensor_free(&outs[j]);
  pc_graph_free(g), pc_graph_free(d);
  return ok;
}

/* every input batched, the first alone, the last alone */
static int check_vmaps(const grad_case *c, const char *tag) {
  pc_graph *g = pc_graph_parse(c->text, strlen(c->text), tag, NULL);
  int ni = g && !g->status ? g->n_inputs : 0;
  pc_graph_free(g);
  int ok = check_vmap(c, tag, (1u << ni) - 1);
  if (ni > 1) ok &= check_vmap(c, tag, 1u) & check_vmap(c, tag, 1u << (ni - 1));
  return ok;
}

static const char *kind_args[] = {"", "(%a)", "(%a, %b)", "(%a, %b, %c)"};

PC_TEST(autodiff_rules_match_finite_differences) {
  int covered[PC_OP_COUNT] = {0}, jvp_covered[PC_OP_COUNT] = {0}, vmap_covered[PC_OP_COUNT] = {0};
  for (int op = 0; op < PC_OP_COUNT; op++) {
    const pc_prim_info *p = pc_prim((pc_op)op);
    int arity = p->kind == PC_KIND_UNARY ? 1 : p->kind == PC_KIND_BINARY ? 2 : p->kind == PC_KIND_TERNARY ? 3 : 0;
    if (!arity || p->result == PC_RES_BOOL || p->operands == PC_CLS_INT || p->operands == PC_CLS_LOGIC) continue;
    char text[512];
    int k = snprintf(text, sizeof text, "graph(");
    for (int i = 0; i < arity; i++) k += snprintf(text + k, sizeof text - (size_t)k, "%s%%%c : f64[2,3]", i ? ", " : "", 'a' + i);
    snprintf(text + k, sizeof text - (size_t)k, "):\n  %%y : f64[2,3] = %s%s\n  return (%%y)\n", p->name, kind_args[arity]);
    grad_case c = {p->name, text, wants_positive((pc_op)op), NULL, 0, 0};
    covered[op] = check_case(&c, p->name);
    jvp_covered[op] = check_jvp(&c, p->name);
    vmap_covered[op] = check_vmaps(&c, p->name);
  }
  /* batching covers the integer and boolean elementwise prims too */
  for (int op = 0; op < PC_OP_COUNT; op++) {
    const pc_prim_info *p = pc_prim((pc_op)op);
    int arity = p->kind == PC_KIND_UNARY ? 1 : p->kind == PC_KIND_BINARY ? 2 : p->kind == PC_KIND_TERNARY ? 3 : 0;
    if (!arity || vmap_covered[op]) continue;
    const char *dt = p->operands == PC_CLS_INT || p->operands == PC_CLS_LOGIC ? "i64" : "f64";
    const char *rt = p->result == PC_RES_BOOL ? "bool" : dt;
    char text[512];
    int k = snprintf(text, sizeof text, "graph(");
    for (int i = 0; i < arity; i++) k += snprintf(text + k, sizeof text - (size_t)k, "%s%%%c : %s[2,3]", i ? ", " : "", 'a' + i, dt);
    snprintf(text + k, sizeof text - (size_t)k, "):\n  %%y : %s[2,3] = %s%s\n  return (%%y)\n", rt, p->name, kind_args[arity]);
    grad_case c = {p->name, text, 0, NULL, 0, 0};
    vmap_covered[op] = check_vmaps(&c, p->name);
  }
  for (size_t i = 0; i < sizeof vmap_cases / sizeof vmap_cases[0]; i++) {
    pc_op op;
    if (CHECK_MSG(pc_op_from_name(vmap_cases[i].prim, &op), "%s: no such prim", vmap_cases[i].prim))
      vmap_covered[op] |= check_vmaps(&vmap_cases[i], vmap_cases[i].prim);
  }
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    pc_op op;
    char tag[64];
    snprintf(tag, sizeof tag, "%s case %zu", cases[i].prim, i);
    if (CHECK_MSG(pc_op_from_name(cases[i].prim, &op), "%s: no such prim", tag)) {
      covered[op] |= check_case(&cases[i], tag);
      jvp_covered[op] |= check_jvp(&cases[i], tag);
      vmap_covered[op] |= check_vmaps(&cases[i], tag);
    }
  }
  /* every prim whose row is a rule is checked by some case */
  for (int op = 0; op < PC_OP_COUNT; op++)
    if (pc_ad_row((pc_op)op)->vjp_how == AD_RULE)
      CHECK_MSG(covered[op], "%s has a gradient rule and no finite-difference case", pc_prim((pc_op)op)->name);
  for (int op = 0; op < PC_OP_COUNT; op++) {
    ad_how h = pc_ad_row((pc_op)op)->jvp_how;
    if (h == AD_RULE || h == AD_ELEM || h == AD_LINEAR || h == AD_BILINEAR)
      CHECK_MSG(jvp_covered[op], "%s has a forward-mode row and no finite-difference case", pc_prim((pc_op)op)->name);
    h = pc_ad_row((pc_op)op)->vmap_how;
    if (h == AD_RULE || h == AD_ELEM)
      CHECK_MSG(vmap_covered[op], "%s has a batching row and no case", pc_prim((pc_op)op)->name);
  }
}

/* a gradient that must pass a prim with no rule stops the transform, naming the node; one that only reaches
 * such a prim's integer side does not */
PC_TEST(autodiff_no_rule_fails_naming_the_node) {
  const char *text = "graph(%x : f64[3], %k : i32[3]):\n"
                     "  %b : f32[3,2] = bitcast(%x, dtype=f32)\n"
                     "  %y : f32[] = reduce_sum(%b, axes=[0,1])\n"
                     "  %m : i32[3] = mul(%k, %k)\n"
                     "  return (%y, %m)\n";
  pc_graph *g = pc_graph_parse(text, strlen(text), "norule", NULL);
  CHECK(g && g->status == PC_OK);
  CHECK(pc_grad(g, NULL) == PC_ERR_UNSUPPORTED);
  CHECK_CONTAINS(pc_error(g), "bitcast has no gradient rule");
  pc_graph_free(g);
  const char *red = "graph(%x : f64[4], %u : f64[2]):\n"
                    "  %i : i64[2] = constant(value=[1, 1])\n"
                    "  %y : f64[4] = scatter(%x, %i, %u, axis=0, reduce=\"max\")\n"
                    "  return (%y)\n";
  g = pc_graph_parse(red, strlen(red), "scattermax", NULL);
  CHECK(g && g->status == PC_OK);
  CHECK(pc_grad(g, NULL) == PC_ERR_UNSUPPORTED);
  CHECK_CONTAINS(pc_error(g), "reduce \"max\"");
  pc_graph_free(g);
}

/* the interface: cotangent inputs after the model's, gradient outputs after the model's, named; the
 * integer input gets none, and a value used twice sums its cotangents */
PC_TEST(autodiff_interface_and_accumulation) {
  const char *text = "graph(%x : f64[2], %n : i64[2]):\n"
                     "  %w : f64[2] = constant(key=\"w\", value=[3.0, -2.0])\n"
                     "  %a : f64[2] = mul(%x, %w)\n"
                     "  %y : f64[2] = add(%a, %x)\n"
                     "  return (%y, %n)\n";
  pc_graph *g = pc_graph_parse(text, strlen(text), "iface", NULL);
  CHECK(g && pc_grad(g, NULL) == PC_OK);
  CHECK_INT(g->n_inputs, 3);
  CHECK_INT(g->n_outputs, 4);
  if (g->n_inputs != 3 || g->n_outputs != 4) return pc_graph_free(g);
  CHECK_STR(g->inputs[2]->name, "grad_y");
  CHECK_STR(g->outputs[2]->name, "grad_x");
  CHECK_STR(g->outputs[3]->name, "grad_w");
  double x[2] = {1.5, -0.5}, ct[2] = {2, 10};
  int64_t n[2] = {7, 8};
  pc_tensor ins[3] = {{PC_f64, 1, {2}, x}, {PC_i64, 1, {2}, n}, {PC_f64, 1, {2}, ct}}, outs[4];
  memset(outs, 0, sizeof outs);
  CHECK(pc_interp(g, ins, 3, outs, 4) == PC_OK);
  const double *gx = outs[2].data, *gw = outs[3].data;
  CHECK(gx && gw && gx[0] == 2 * (3 + 1) && gx[1] == 10 * (-2 + 1)); /* d/dx (x w + x) = w + 1 */
  CHECK(gw && gw[0] == 2 * 1.5 && gw[1] == 10 * -0.5);                  /* d/dw = x */
  for (int i = 0; i < 4; i++) pc_tensor_free(&outs[i]);
  pc_graph_free(g);
}

/* ties, as torch (1.13) gives them: torch.relu(x) passes no gradient at x = 0 ([-1, 0, 2] -> [0, 0, 1]), and
 * torch.maximum(a, b) splits a tie between a and b ([1, 0] vs [1, 2] -> a [0.5, 0], b [0.5, 1]); max against a
 * constant is ReLU here, its mask read off the result */
PC_TEST(autodiff_max_ties_as_torch) {
  const char *text = "graph(%x : f64[3], %a : f64[2], %b : f64[2]):\n"
                     "  %z : f64[] = constant(value=[0.0])\n"
                     "  %zz : f64[3] = broadcast_in_dim(%z, shape=[3], dims=[])\n"
                     "  %r : f64[3] = max(%x, %zz)\n"
                     "  %m : f64[2] = max(%a, %b)\n"
                     "  return (%r, %m)\n";
  pc_graph *g = pc_graph_parse(text, strlen(text), "ties", NULL);
  if (!CHECK_MSG(g && pc_grad(g, NULL) == PC_OK && g->n_outputs == 5, "%s", g ? pc_error(g) : "parse")) return pc_graph_free(g);
  double x[3] = {-1, 0, 2}, a[2] = {1, 0}, b[2] = {1, 2}, cr[3] = {1, 1, 1}, cm[2] = {1, 1};
  pc_tensor ins[5] = {{PC_f64, 1, {3}, x}, {PC_f64, 1, {2}, a}, {PC_f64, 1, {2}, b}, {PC_f64, 1, {3}, cr},
                      {PC_f64, 1, {2}, cm}}, outs[5];
  memset(outs, 0, sizeof outs);
  if (CHECK(pc_interp(g, ins, 5, outs, 5) == PC_OK)) {
    const double *gx = outs[2].data, *ga = outs[3].data, *gb = outs[4].data;
    CHECK(gx[0] == 0 && gx[1] == 0 && gx[2] == 1);
    CHECK(ga[0] == 0.5 && ga[1] == 0 && gb[0] == 0.5 && gb[1] == 1);
  }
  for (int i = 0; i < 5; i++) pc_tensor_free(&outs[i]);
  pc_graph_free(g);
}

/* a softmax's max shift passes no gradient (passes/ad_shift.c): no tie count (eq) nor row sum for it in the
 * backward of softmax and log-softmax, which is torch's form, one row sum and no division (y (gy - sum(gy y)),
 * gy - exp(y) sum(gy)), and still matches finite differences; where exp(x - max) is also an output the function
 * is not shift-free, and the max's gradient is taken (finite differences fail if it is dropped there) */
#define SOFTMAX_HEAD                                                                                   \
  "graph(%x : f64[2,5]):\n  %m : f64[2] = reduce_max(%x, axes=[1])\n"                                 \
  "  %mr : f64[2,1] = reshape(%m, shape=[2,1])\n"                                                     \
  "  %mb : f64[2,5] = broadcast_in_dim(%mr, shape=[2,5], dims=[0,1])\n  %z : f64[2,5] = sub(%x, %mb)\n" \
  "  %e : f64[2,5] = exp(%z)\n  %s : f64[2] = reduce_sum(%e, axes=[1])\n"
PC_TEST(autodiff_softmax_shift_passes_no_gradient) {
  static const char *texts[3] = {
      SOFTMAX_HEAD "  %sr : f64[2,1] = reshape(%s, shape=[2,1])\n"
                   "  %sb : f64[2,5] = broadcast_in_dim(%sr, shape=[2,5], dims=[0,1])\n"
                   "  %y : f64[2,5] = div(%e, %sb)\n  return (%y)\n",
      SOFTMAX_HEAD "  %l : f64[2] = log(%s)\n  %lr : f64[2,1] = reshape(%l, shape=[2,1])\n"
                   "  %lb : f64[2,5] = broadcast_in_dim(%lr, shape=[2,5], dims=[0,1])\n"
                   "  %y : f64[2,5] = sub(%z, %lb)\n  return (%y)\n",
      SOFTMAX_HEAD "  %sr : f64[2,1] = reshape(%s, shape=[2,1])\n"
                   "  %sb : f64[2,5] = broadcast_in_dim(%sr, shape=[2,5], dims=[0,1])\n"
                   "  %y : f64[2,5] = div(%e, %sb)\n  return (%y, %e)\n"};
  static const int want_eq[3] = {0, 0, 1}, want_sums[3] = {2, 2, 4}, want_divs[3] = {1, 0, 3};
  for (int t = 0; t < 3; t++) {
    char tag[32];
    snprintf(tag, sizeof tag, "softmax case %d", t);
    grad_case c = {"reduce_max", texts[t], 0, NULL, 0, 0};
    CHECK(check_case(&c, tag));
    pc_graph *g = pc_graph_parse(texts[t], strlen(texts[t]), tag, NULL);
    if (!CHECK_MSG(g && !g->status && pc_grad(g, NULL) == PC_OK, "%s: %s", tag, g ? pc_error(g) : "no graph")) {
      pc_graph_free(g);
      continue;
    }
    int eqs = 0, sums = 0, divs = 0;
    for (int i = 0; i < g->n_nodes; i++) {
      pc_op op = g->nodes[i]->op;
      eqs += op == PC_OP_eq, sums += op == PC_OP_reduce_sum, divs += op == PC_OP_div;
    }
    CHECK_MSG(eqs == want_eq[t] && sums == want_sums[t] && divs == want_divs[t], "%s: %d eq, %d reduce_sum, %d div; "
              "want %d, %d, %d", tag, eqs, sums, divs, want_eq[t], want_sums[t], want_divs[t]);
    pc_graph_free(g);
  }
}
#undef SOFTMAX_HEAD

/* a max pool's chain of max over strided slices, as the frontends import it: k x k windows s apart on an n x n
 * input, taps in row-major order */
static void pool_chain_text(char *t, size_t cap, int n, int k, int s) {
  int o = (n - k) / s + 1, len = snprintf(t, cap, "graph(%%x : f64[1,1,%d,%d]):\n", n, n);
  for (int i = 0; i < k * k; i++) {
    int a = i / k, b = i % k;
    len += snprintf(t + len, cap - (size_t)len,
                    "  %%t%d : f64[1,1,%d,%d] = slice(%%x, start=[0,0,%d,%d], limit=[1,1,%d,%d], stride=[1,1,%d,%d])\n",
                    i, o, o, a, b, a + (o - 1) * s + 1, b + (o - 1) * s + 1, s, s);
    if (i) len += snprintf(t + len, cap - (size_t)len, "  %%m%d : f64[1,1,%d,%d] = max(%%%c%d, %%t%d)\n", i, o, o,
                           i == 1 ? 't' : 'm', i - 1, i);
  }
  snprintf(t + len, cap - (size_t)len, "  return (%%m%d)\n", k * k - 1);
}

/* the pool chain's backward is one scatter of gy to each window's first maximum (passes/ad_pool.c): no pads of
 * the taps' gradients; against finite differences with overlapping windows; ties as torch's max_pool2d gives
 * them (all to the window's first maximum, where the maxes' own rule splits a tie) and a NaN taking its window's */
PC_TEST(autodiff_max_pool_scatters_to_first_maximum) {
  char text[4096];
  pool_chain_text(text, sizeof text, 5, 3, 2);
  grad_case c = {"max", text, 0, NULL, 0, 0};
  CHECK(check_case(&c, "pool 3x3/2"));
  pc_graph *g = pc_graph_parse(text, strlen(text), "pool", NULL);
  if (!CHECK_MSG(g && !g->status && pc_grad(g, NULL) == PC_OK && g->n_outputs == 2, "%s", g ? pc_error(g) : "parse"))
    return pc_graph_free(g);
  int scatters = 0, pads = 0;
  for (int i = 0; i < g->n_nodes; i++) scatters += g->nodes[i]->op == PC_OP_scatter, pads += g->nodes[i]->op == PC_OP_pad;
  CHECK_MSG(scatters == 1 && pads == 0, "%d scatters, %d pads", scatters, pads);
  double x[25] = {0}, ct[4] = {1, 2, 3, 4};
  pc_tensor ins[2] = {{PC_f64, 4, {1, 1, 5, 5}, x}, {PC_f64, 4, {1, 1, 2, 2}, ct}}, outs[2];
  for (int nan = 0; nan < 2; nan++) {
    if (nan) /* distinct values, one NaN in the first window only */
      for (int i = 0; i < 25; i++) x[i] = i == 6 ? NAN : (i * 7 % 25) * 0.25;
    memset(outs, 0, sizeof outs);
    if (!CHECK(pc_interp(g, ins, 2, outs, 2) == PC_OK)) break;
    const double *y = outs[0].data, *gx = outs[1].data;
    for (int i = 0; i < 25; i++) {
      int h = i / 5, w = i % 5;
      double want = 0;
      if (!nan && h % 2 == 0 && w % 2 == 0 && h < 4 && w < 4) want = ct[h / 2 * 2 + w / 2]; /* each window's origin */
      if (nan) { /* the NaN's window sends it all there; the others to their largest */
        for (int o = 0; o < 4; o++) {
          int best = -1, found_nan = 0;
          for (int t = 0; t < 9; t++) {
            int p = (o / 2 * 2 + t / 3) * 5 + o % 2 * 2 + t % 3;
            if (isnan(x[p]) && !found_nan) best = p, found_nan = 1;
            else if (!found_nan && (best < 0 || x[p] > x[best])) best = p;
          }
          if (best == i) want += ct[o];
        }
      }
      CHECK_MSG(gx[i] == want, "%s: gx[%d] = %g, want %g", nan ? "nan" : "ties", i, gx[i], want);
    }
    if (nan) CHECK(isnan(y[0]) && !isnan(y[3]));
    for (int i = 0; i < 2; i++) pc_tensor_free(&outs[i]);
  }
  pc_graph_free(g);
}

/* strided slices' cotangents summed by stride phases (passes/ad_pads.c) equal the sum of the full-size pads: the
 * same additions per element (each phase's pads in order; the other pads add zeros), so exactly; steps 1, 2
 * and 3, phases no pad holds, a pad ending short of the far edge; no pad of the phase form has interior steps */
/* a linear layer's [in, out] weight gets its gradient as x^T gy in its own order, not (gy^T x) transposed
 * (the optimizer update read the transposed one a column at a time); its values are the finite-difference
 * case above. A [out, in] weight (ONNX Gemm with transB) was in order already: no transpose either. */
PC_TEST(autodiff_linear_weight_gradient_in_its_order) {
  static const char *texts[2] = {
      "graph(%x : f32[4,3], %w : f32[3,5]):\n  %y : f32[4,5] = dot_general(%x, %w, lhs_contract=[1], "
      "rhs_contract=[0], lhs_batch=[], rhs_batch=[])\n  return (%y)\n",
      "graph(%x : f32[4,3], %w : f32[5,3]):\n  %y : f32[4,5] = dot_general(%x, %w, lhs_contract=[1], "
      "rhs_contract=[1], lhs_batch=[], rhs_batch=[])\n  return (%y)\n"};
  for (int t = 0; t < 2; t++) {
    pc_graph *g = pc_graph_parse(texts[t], strlen(texts[t]), "linear", NULL);
    const char *wrt[2] = {"x", "w"};
    pc_grad_opts o = {wrt, 2};
    if (!CHECK_MSG(g && !g->status && pc_grad(g, &o) == PC_OK, "%s", g ? pc_error(g) : "no graph")) {
      pc_graph_free(g);
      continue;
    }
    int transposes = 0;
    for (int i = 0; i < g->n_nodes; i++) transposes += g->nodes[i]->op == PC_OP_transpose;
    CHECK_MSG(transposes == 0, "case %d: %d transposes in the gradient graph", t, transposes);
    CHECK(pc_type_equal(&g->outputs[2]->type, &g->inputs[1]->type));
    pc_graph_free(g);
  }
}

PC_TEST(autodiff_strided_pads_summed_by_phases) {
  static const int64_t dims[4][3] = {{2, 4, 3}, {2, 3, 3}, {2, 3, 3}, {1, 3, 1}};
  static const int64_t lo[4][3] = {{0, 0, 0}, {0, 1, 1}, {0, 2, 2}, {1, 0, 4}};
  const int64_t full[3] = {2, 7, 9}, in[3] = {0, 1, 2};
  pc_graph *g = pc_graph_new();
  pc_value *pads[4];
  pc_tensor ins[4], outs[2];
  float *data[4];
  for (int t = 0; t < 4; t++) {
    pc_type ty = {PC_f32, 3, {dims[t][0], dims[t][1], dims[t][2]}};
    pc_value *x = pc_input_add(g, NULL, ty);
    int64_t hi[3];
    for (int d = 0; d < 3; d++) hi[d] = full[d] - (lo[t][d] + (dims[t][d] - 1) * (in[d] + 1) + 1);
    pc_attr a[4] = {pc_a_ints("low", lo[t], 3), pc_a_ints("high", hi, 3), pc_a_ints("interior", in, 3),
                    pc_a_float("value", 0)};
    pads[t] = pc_build(g, PC_OP_pad, &x, 1, a, 4);
    int64_t n = dims[t][0] * dims[t][1] * dims[t][2];
    data[t] = malloc(sizeof(float) * (size_t)n);
    for (int64_t i = 0; i < n; i++) data[t][i] = (float)((t * 37 + i * 11) % 17) * 0.37f - 2.5f;
    ins[t] = (pc_tensor){PC_f32, 3, {dims[t][0], dims[t][1], dims[t][2]}, data[t]};
  }
  int before = g->n_nodes, strided = 0;
  for (int t = 0; t < 4; t++) CHECK(ad_strided_pad(pads[t]) && ad_same_steps(pads[0], pads[t]));
  pc_output_add(g, pc_add(g, pc_add(g, pc_add(g, pads[0], pads[1]), pads[2]), pads[3]));
  pc_output_add(g, ad_sum_strided_pads(g, pads, 4));
  for (int i = before + 3; i < g->n_nodes; i++)
    strided += g->nodes[i]->op == PC_OP_pad && ad_strided_pad(g->nodes[i]->out[0]);
  CHECK_INT(strided, 0);
  memset(outs, 0, sizeof outs);
  if (CHECK_MSG(g->status == PC_OK && pc_interp(g, ins, 4, outs, 2) == PC_OK, "%s", pc_error(g))) {
    const float *want = outs[0].data, *got = outs[1].data;
    CHECK(pc_type_equal(&g->outputs[0]->type, &g->outputs[1]->type));
    for (int64_t i = 0; i < full[0] * full[1] * full[2]; i++)
      if (!CHECK_MSG(got[i] == want[i], "element %lld: %g, want %g", (long long)i, got[i], want[i])) break;
  }
  for (int t = 0; t < 4; t++) free(data[t]);
  for (int i = 0; i < 2; i++) pc_tensor_free(&outs[i]);
  pc_graph_free(g);
}

/* transforms compose: the jvp of a gradient graph is the Hessian-vector product, checked by central
 * differences of the gradient graph along the tangents */
PC_TEST(autodiff_jvp_of_grad_is_hessian_vector_product) {
  const char *text = "graph(%x : f64[2,3]):\n"
                     "  %w : f64[3,4] = constant(key=\"w\", value=[0.3, -0.2, 0.5, 0.1, -0.4, 0.2, 0.7, -0.6, 0.25, "
                     "0.15, -0.35, 0.45])\n"
                     "  %h : f64[2,4] = dot_general(%x, %w, lhs_contract=[1], rhs_contract=[0], lhs_batch=[], rhs_batch=[])\n"
                     "  %t : f64[2,4] = tanh(%h)\n"
                     "  %e : f64[2,4] = exp(%t)\n"
                     "  %m : f64[2] = reduce_max(%e, axes=[1])\n"
                     "  return (%m)\n";
  pc_graph *g = pc_graph_parse(text, strlen(text), "hvp", NULL);
  CHECK(g && pc_grad(g, NULL) == PC_OK);
  char *grad_text = g ? pc_graph_to_string(g) : NULL;
  CHECK(grad_text != NULL);
  if (grad_text) {
    grad_case c = {"hvp", grad_text, 0, NULL, 1e-5, 1e-5};
    CHECK(check_jvp(&c, "jvp of grad"));
  }
  free(grad_text);
  pc_graph_free(g);
}

/* grad and jvp of a batched graph against finite differences, and a batched gradient graph against a loop
 * over the batch, on the contraction and conv cases */
PC_TEST(autodiff_transforms_compose_with_vmap) {
  int n = 0;
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    if (strcmp(cases[i].prim, "dot_general") && strcmp(cases[i].prim, "conv")) continue;
    pc_graph *g = pc_graph_parse(cases[i].text, strlen(cases[i].text), "compose", NULL);
    const char *names[2] = {g->inputs[0]->name, g->inputs[1]->name};
    pc_vmap_opts o = {names, 2, 2};
    CHECK(g && pc_vmap(g, &o) == PC_OK);
    char *batched = pc_graph_to_string(g);
    pc_graph_free(g);
    g = pc_graph_parse(cases[i].text, strlen(cases[i].text), "compose", NULL);
    CHECK(g && pc_grad(g, NULL) == PC_OK);
    char *grad = pc_graph_to_string(g);
    pc_graph_free(g);
    if (CHECK(batched && grad)) {
      grad_case b = cases[i], gr = cases[i];
      b.text = batched, gr.text = grad;
      CHECK_MSG(check_case(&b, "grad of vmap"), "case %zu", i);
      CHECK_MSG(check_jvp(&b, "jvp of vmap"), "case %zu", i);
      CHECK_MSG(check_vmaps(&gr, "vmap of grad"), "case %zu", i);
      n++;
    }
    free(batched), free(grad);
  }
  CHECK_INT(n, 8);
}
