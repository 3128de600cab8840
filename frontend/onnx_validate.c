/* frontend/onnx_validate.c: what makes a GraphProto invalid before any of it is imported: a value name defined
 * twice, an initializer that does not fit the graph input it gives a default to. */
#include "frontend/onnx_internal.h"

#include <stdlib.h>
#include <string.h>

/* one definition of a value name: a graph input or initializer (node -1) or node `node`'s output */
typedef struct def {
  const char *name;
  long node;
} def;

static int cmp_def(const void *a, const void *b) {
  const def *x = a, *y = b;
  int c = strcmp(x->name, y->name);
  return c ? c : (x->node > y->node) - (x->node < y->node);
}

static void node_label(const Onnx__GraphProto *gp, long i, const char *scope, char *out, size_t n) {
  const Onnx__NodeProto *nd = gp->node[i];
  const char *op = nd->op_type ? nd->op_type : "?";
  if (nd->name && *nd->name) snprintf(out, n, "%s%s \"%s\"", scope, op, nd->name);
  else snprintf(out, n, "%s%s #%ld", scope, op, i);
}

/* SSA: each name has one definition in its graph (an input that is also an initializer is one) */
static pc_status check_unique(pc_graph *g, const Onnx__GraphProto *gp, const char *scope) {
  size_t n = gp->n_input + gp->n_initializer;
  for (size_t i = 0; i < gp->n_node; i++) n += gp->node[i]->n_output;
  def *d = malloc(sizeof *d * (n + 1));
  if (!d) return pc_fail(g, PC_ERR_NOMEM, "out of memory");
  size_t k = 0;
  for (size_t i = 0; i < gp->n_input; i++)
    if (gp->input[i]->name && *gp->input[i]->name) d[k++] = (def){gp->input[i]->name, -2};
  for (size_t i = 0; i < gp->n_initializer; i++)
    if (gp->initializer[i]->name && *gp->initializer[i]->name) d[k++] = (def){gp->initializer[i]->name, -1};
  for (size_t i = 0; i < gp->n_node; i++)
    for (size_t j = 0; j < gp->node[i]->n_output; j++)
      if (gp->node[i]->output[j] && *gp->node[i]->output[j]) d[k++] = (def){gp->node[i]->output[j], (long)i};
  qsort(d, k, sizeof *d, cmp_def);
  pc_status s = PC_OK;
  for (size_t i = 1; i < k && s == PC_OK; i++) {
    if (strcmp(d[i - 1].name, d[i].name) != 0) continue;
    const def *a = &d[i - 1], *b = &d[i];
    char la[300], lb[300];
    if (a->node == -2 && b->node == -1) continue; /* an input with its default value */
    if (b->node < 0) {
      s = pc_fail(g, PC_ERR_PARSE, "%s'%s' is defined twice as a graph %s", scope, a->name,
                  b->node == -1 ? "initializer" : "input");
      break;
    }
    node_label(gp, b->node, scope, lb, sizeof lb);
    if (a->node >= 0) node_label(gp, a->node, scope, la, sizeof la);
    else snprintf(la, sizeof la, "the graph %s", a->node == -1 ? "initializer" : "input");
    s = pc_fail(g, PC_ERR_PARSE, "%s: output '%s' is already defined by %s", lb, a->name, la);
  }
  free(d);
  return s;
}

const Onnx__TensorProto *ox_initializer_of(const Onnx__GraphProto *gp, const char *name) {
  for (size_t i = 0; name && i < gp->n_initializer; i++)
    if (gp->initializer[i]->name && strcmp(gp->initializer[i]->name, name) == 0) return gp->initializer[i];
  return NULL;
}

/* an initializer that is also a graph input is its default value: it must have the input's type */
static pc_status check_defaults(pc_graph *g, const Onnx__GraphProto *gp, const char *scope) {
  for (size_t i = 0; i < gp->n_input; i++) {
    const Onnx__ValueInfoProto *vi = gp->input[i];
    const Onnx__TensorProto *init = ox_initializer_of(gp, vi->name);
    const Onnx__TypeProto *tp = vi->type;
    if (!init || !tp || tp->value_case != ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE || !tp->tensor_type) continue;
    int et = tp->tensor_type->elem_type;
    if (et && et != init->data_type)
      return pc_fail(g, PC_ERR_TYPE, "%sinitializer '%s' has element type %s, its graph input declares %s", scope,
                     vi->name, ox_onnx_type_name(init->data_type), ox_onnx_type_name(et));
    const Onnx__TensorShapeProto *sh = tp->tensor_type->shape;
    if (!sh) continue;
    int ok = sh->n_dim == init->n_dims;
    for (size_t k = 0; ok && k < sh->n_dim; k++)
      ok = sh->dim[k]->value_case != ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE ||
           sh->dim[k]->dim_value == init->dims[k];
    if (!ok) {
      char want[160], got[160];
      int a = 0, b = 0;
      for (size_t k = 0; k < sh->n_dim && a < 140; k++)
        a += snprintf(want + a, sizeof want - (size_t)a, "%s%lld", k ? "," : "",
                      sh->dim[k]->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE
                          ? (long long)sh->dim[k]->dim_value : -1LL);
      for (size_t k = 0; k < init->n_dims && b < 140; k++)
        b += snprintf(got + b, sizeof got - (size_t)b, "%s%lld", k ? "," : "", (long long)init->dims[k]);
      want[a] = got[b] = 0;
      return pc_fail(g, PC_ERR_SHAPE, "%sinitializer '%s' has shape [%s], its graph input declares [%s]", scope,
                     vi->name, got, want);
    }
  }
  return PC_OK;
}

pc_status ox_validate_graph(pc_graph *g, const Onnx__GraphProto *gp, const char *scope) {
  if (check_unique(g, gp, scope ? scope : "") != PC_OK) return g->status;
  return check_defaults(g, gp, scope ? scope : "");
}
