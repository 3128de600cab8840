/* passes/train.c: a training step (pc_train, passes/passes.h): the model's weights become state inputs, a
 * loss on its first output against a label input, the gradient by reverse mode (autodiff.c), and an
 * optimizer's update, each state output replacing its input for the next step.
 *
 * Losses and optimizers follow torch: MSELoss and CrossEntropyLoss with reduction "mean"; SGD (with
 * momentum: the buffer starts at zero, which equals torch's first-step copy of the gradient), Adam (its
 * weight decay is L2, added to the gradient) and AdamW (decoupled: the weight shrinks by lr * wd first),
 * with bias corrections from a step count that is state too. */
#include "passes/autodiff.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const loss_names[PC_LOSS_COUNT] = {"mse", "cross_entropy"};
static const char *const optim_names[PC_OPTIM_COUNT] = {"sgd", "momentum", "adam", "adamw"};

static int find_name(const char *const *names, int n, const char *s) {
  for (int i = 0; s && i < n; i++)
    if (!strcmp(names[i], s)) return i;
  return -1;
}
int pc_loss_parse(const char *s) { return find_name(loss_names, PC_LOSS_COUNT, s); }
int pc_optim_parse(const char *s) { return find_name(optim_names, PC_OPTIM_COUNT, s); }
const char *pc_loss_name(int l) { return l >= 0 && l < PC_LOSS_COUNT ? loss_names[l] : "?"; }
const char *pc_optim_name(int o) { return o >= 0 && o < PC_OPTIM_COUNT ? optim_names[o] : "?"; }

void pc_train_opts_default(pc_train_opts *o) {
  memset(o, 0, sizeof *o);
  o->loss = PC_LOSS_MSE, o->optimizer = PC_OPTIM_SGD, o->label = "label";
  o->lr = 1e-3, o->momentum = 0.9, o->beta1 = 0.9, o->beta2 = 0.999, o->eps = 1e-8;
}

/* v broadcast to like's shape (v rank 0) */
static pc_value *spread(pc_graph *g, pc_value *v, const pc_value *like) {
  return pc_broadcast_in_dim(g, v, like->type.rank, like->type.dims, NULL);
}
#define K(v, like) pc_full_like(g, (v), (like))

static pc_value *mean_all(pc_graph *g, pc_value *x) {
  int64_t axes[PC_MAX_RANK];
  for (int d = 0; d < x->type.rank; d++) axes[d] = d;
  pc_value *s = x->type.rank ? pc_reduce(g, PC_OP_reduce_sum, x, x->type.rank, axes) : x;
  int64_t n = pc_type_numel(&x->type);
  return pc_mul(g, s, pc_scalar(g, x->type.dtype, n > 0 ? 1.0 / (double)n : 0));
}

/* torch's CrossEntropyLoss over logits [N, C] and class indices [N]: mean of logsumexp - the label's logit */
static pc_value *cross_entropy(pc_graph *g, pc_value *y, pc_value *label) {
  int64_t one = 1;
  const int64_t *dims = y->type.dims;
  pc_value *m = pc_reduce(g, PC_OP_reduce_max, y, 1, &one);
  int64_t keep[1] = {0};
  pc_value *mb = pc_broadcast_in_dim(g, m, 2, dims, keep);
  pc_value *s = pc_reduce(g, PC_OP_reduce_sum, pc_exp(g, pc_sub(g, y, mb)), 1, &one);
  pc_value *lse = pc_add(g, pc_log(g, s), m);
  pc_attr ia[3] = {pc_a_dtype("dtype", label->type.dtype), pc_a_ints("shape", dims, 2), pc_a_int("axis", 1)};
  pc_value *cls = pc_build(g, PC_OP_iota, NULL, 0, ia, 3);
  pc_value *hot = pc_convert(g, pc_eq(g, cls, pc_broadcast_in_dim(g, label, 2, dims, keep)), y->type.dtype);
  pc_value *picked = pc_reduce(g, PC_OP_reduce_sum, pc_mul(g, y, hot), 1, &one);
  return mean_all(g, pc_sub(g, lse, picked));
}

static pc_value *state_input(pc_graph *g, const char *name, const pc_type *t, const void *init, const void **inits,
                             int *n) {
  pc_value *v = pc_input_add(g, name, *t);
  inits[(*n)++] = init;
  return v;
}

/* One weight read by nodes of several model nodes: torch.onnx keeps one initializer for identical tensors
 * (the layer norms' ones and zeros), which a training step then trains as one parameter where torch had
 * several. g->tied_note names them (at most four, then a count); NULL when there are none. */
typedef struct {
  int w;
  const char *origin;
} tie_use;

static int tie_cmp(const void *a, const void *b) {
  const tie_use *x = a, *y = b;
  if (x->w != y->w) return x->w < y->w ? -1 : 1;
  return strcmp(x->origin, y->origin);
}

static void note_tied(pc_graph *g, pc_node **wn, int nw, int n0) {
  int *of = malloc(sizeof *of * (size_t)(g->n_values + 1)), nu = 0, cap = 0;
  tie_use *u = NULL;
  if (!of) return;
  for (int v = 0; v < g->n_values; v++) of[v] = -1;
  for (int i = 0; i < nw; i++) of[wn[i]->out[0]->id] = i;
  for (int i = 0; i < n0; i++) {
    const pc_node *n = g->nodes[i];
    for (int k = 0; k < n->n_in && !n->dead; k++) {
      if (of[n->in[k]->id] < 0 || !n->origin) continue;
      if (nu == cap) {
        tie_use *t = realloc(u, sizeof *u * (size_t)(cap = cap ? 2 * cap : 64));
        if (!t) goto done;
        u = t;
      }
      u[nu++] = (tie_use){of[n->in[k]->id], n->origin};
    }
  }
  qsort(u, (size_t)nu, sizeof *u, tie_cmp);
  char list[400] = "";
  int tied = 0;
  for (int a = 0; a < nu;) {
    int b = a, origins = 1;
    for (; b + 1 < nu && u[b + 1].w == u[a].w; b++) origins += strcmp(u[b + 1].origin, u[b].origin) != 0;
    if (origins > 1 && tied++ < 4) {
      size_t l = strlen(list);
      snprintf(list + l, sizeof list - l, "%s'%s' (%d model nodes)", l ? ", " : "", ad_weight_key(wn[u[a].w]), origins);
    }
    a = b + 1;
  }
  if (tied)
    g->tied_note = pc_strfmt(g, "%d weight%s read by several model nodes, each trained as one parameter: %s%s", tied,
                             tied > 1 ? "s" : "", list, tied > 4 ? " and more" : "");
done:
  free(u), free(of);
}

pc_status pc_train(pc_graph *g, const pc_train_opts *o) {
  if (g->status) return g->status;
  if (g->n_outputs < 1 || !pc_dtype_is_float(g->outputs[0]->type.dtype))
    return pc_fail(g, PC_ERR_TYPE, "train: the model's first output must be float (the prediction the loss reads)");
  if (g->n_state) return pc_fail(g, PC_ERR_ATTR, "train: the graph is a training step already");
  pc_value *y = g->outputs[0];
  int n0 = g->n_nodes, nv = g->n_values;
  /* the weights, in graph order */
  pc_node **wn = malloc(sizeof *wn * (size_t)(n0 + 1));
  pc_value **repl = calloc((size_t)nv + 1, sizeof *repl);
  int nw = 0;
  if (!wn || !repl) {
    free(wn), free(repl);
    return pc_fail(g, PC_ERR_NOMEM, "out of memory");
  }
  for (int i = 0; i < n0; i++)
    if (ad_weight_key(g->nodes[i]) && pc_dtype_is_float(g->nodes[i]->out[0]->type.dtype)) wn[nw++] = g->nodes[i];
  for (int i = 0; i < g->n_inputs; i++)
    if (g->inputs[i]->name && !strcmp(g->inputs[i]->name, o->label))
      pc_fail(g, PC_ERR_ATTR, "train: the model has an input named '%s' already: name the label input with --label",
              o->label);
  if (!nw) pc_fail(g, PC_ERR_ATTR, "train: the model has no float weights (initializers) to train");
  else note_tied(g, wn, nw, n0);
  if (o->loss == PC_LOSS_CROSS_ENTROPY && y->type.rank != 2)
    pc_fail(g, PC_ERR_SHAPE, "train: cross_entropy reads logits [N, C]; the first output has rank %d", y->type.rank);
  if (g->status) goto done;
  /* the label, then the state inputs: weights, optimizer state, step */
  pc_type lt = y->type;
  if (o->loss == PC_LOSS_CROSS_ENTROPY) lt = pc_type_make(PC_i64, 1, y->type.dims);
  pc_value *label = pc_input_add(g, o->label, lt);
  int per = o->optimizer == PC_OPTIM_MOMENTUM ? 1 : o->optimizer >= PC_OPTIM_ADAM ? 2 : 0;
  int n_state = nw * (1 + per) + (per == 2), ns = 0;
  const void **inits = pc_alloc(g, sizeof *inits * (size_t)(n_state + 1));
  pc_value **w = calloc((size_t)n_state + 1, sizeof *w), **grads = calloc((size_t)nw + 1, sizeof *grads);
  if (!inits || !w || !grads) {
    free(w), free(grads);
    pc_fail(g, PC_ERR_NOMEM, "out of memory");
    goto done;
  }
  for (int i = 0; i < nw && g->status == PC_OK; i++) {
    w[i] = state_input(g, ad_weight_key(wn[i]), &wn[i]->out[0]->type, wn[i]->data, inits, &ns);
    if (w[i]) repl[wn[i]->out[0]->id] = w[i];
  }
  static const char *const suffix[2][2] = {{".momentum_buffer", ""}, {".exp_avg", ".exp_avg_sq"}};
  for (int k = 0; k < per && g->status == PC_OK; k++)
    for (int i = 0; i < nw && g->status == PC_OK; i++)
      w[nw * (1 + k) + i] = state_input(g, pc_strfmt(g, "%s%s", ad_weight_key(wn[i]), suffix[per - 1][k]),
                                        &wn[i]->out[0]->type, NULL, inits, &ns);
  pc_type st = pc_type_make(y->type.dtype, 0, NULL);
  pc_value *step = per == 2 && g->status == PC_OK ? state_input(g, "step", &st, NULL, inits, &ns) : NULL;
  if (step) w[n_state - 1] = step;
  /* the weights' uses read the inputs now; the constants go */
  for (int i = 0; i < n0 && g->status == PC_OK; i++)
    for (int k = 0; k < g->nodes[i]->n_in; k++)
      if (repl[g->nodes[i]->in[k]->id]) g->nodes[i]->in[k] = repl[g->nodes[i]->in[k]->id];
  for (int j = 0; j < g->n_outputs; j++)
    if (repl[g->outputs[j]->id]) g->outputs[j] = repl[g->outputs[j]->id];
  for (int i = 0; i < nw; i++) wn[i]->dead = 1;
  if (g->status) goto fail;
  y = g->outputs[0];
  pc_value *diff = o->loss == PC_LOSS_MSE ? pc_sub(g, y, label) : NULL;
  pc_value *loss = diff ? mean_all(g, pc_mul(g, diff, diff)) : cross_entropy(g, y, label);
  pc_value *seed = loss ? pc_scalar(g, loss->type.dtype, 1.0) : NULL;
  if (!seed || ad_backward(g, w, nw, &loss, &seed, 1, grads) != PC_OK) goto fail;
  pc_value **next = calloc((size_t)n_state + 1, sizeof *next);
  if (!next) {
    pc_fail(g, PC_ERR_NOMEM, "out of memory");
    goto fail;
  }
  pc_value *t = step ? pc_add(g, step, pc_scalar(g, st.dtype, 1)) : NULL;
  for (int i = 0; i < nw && g->status == PC_OK; i++) {
    pc_value *x = w[i], *d = grads[i];
    double wd = o->weight_decay;
    if (wd != 0 && o->optimizer != PC_OPTIM_ADAMW) d = pc_add(g, d, pc_mul(g, x, K(wd, x)));
    if (o->optimizer == PC_OPTIM_SGD) {
      next[i] = pc_sub(g, x, pc_mul(g, d, K(o->lr, x)));
    } else if (o->optimizer == PC_OPTIM_MOMENTUM) {
      pc_value *buf = pc_add(g, pc_mul(g, w[nw + i], K(o->momentum, x)), d);
      next[nw + i] = buf;
      next[i] = pc_sub(g, x, pc_mul(g, buf, K(o->lr, x)));
    } else {
      pc_value *m = pc_add(g, pc_mul(g, w[nw + i], K(o->beta1, x)), pc_mul(g, d, K(1 - o->beta1, x)));
      pc_value *v = pc_add(g, pc_mul(g, w[2 * nw + i], K(o->beta2, x)), pc_mul(g, pc_mul(g, d, d), K(1 - o->beta2, x)));
      next[nw + i] = m, next[2 * nw + i] = v;
      /* torch: w -= lr / (1 - b1^t) * m / (sqrt(v) / sqrt(1 - b2^t) + eps) */
      pc_value *bc1 = pc_sub(g, pc_scalar(g, st.dtype, 1), pc_pow(g, pc_scalar(g, st.dtype, o->beta1), t));
      pc_value *bc2 = pc_sub(g, pc_scalar(g, st.dtype, 1), pc_pow(g, pc_scalar(g, st.dtype, o->beta2), t));
      pc_value *denom = pc_add(g, pc_div(g, pc_sqrt(g, v), spread(g, pc_sqrt(g, bc2), x)), K(o->eps, x));
      pc_value *upd = pc_mul(g, pc_div(g, m, denom), spread(g, pc_div(g, pc_scalar(g, st.dtype, o->lr), bc1), x));
      pc_value *base = o->optimizer == PC_OPTIM_ADAMW && wd != 0 ? pc_mul(g, x, K(1 - o->lr * wd, x)) : x;
      next[i] = pc_sub(g, base, upd);
    }
  }
  if (step) next[n_state - 1] = t;
  /* outputs: the loss, the model's outputs, then each state's next value in its input's order */
  if (loss) pc_value_set_name(g, loss, "loss");
  if (pc_output_add(g, loss) == PC_OK) {
    memmove(g->outputs + 1, g->outputs, sizeof *g->outputs * (size_t)(g->n_outputs - 1));
    g->outputs[0] = loss;
  }
  ad_names names = {0};
  if (g->status == PC_OK && !ad_names_init(&names, g, n_state)) pc_fail(g, PC_ERR_NOMEM, "out of memory");
  for (int i = 0; i < n_state && g->status == PC_OK; i++) ad_add_output(g, &names, next[i], "next.", w[i]->name);
  ad_names_free(&names);
  free(next);
  if (g->status == PC_OK) {
    g->n_state = n_state, g->n_state_weights = nw, g->state_init = inits;
    pc_graph_compact(g);
  }
fail:
  free(w), free(grads);
done:
  free(wn), free(repl);
  return g->status;
}
