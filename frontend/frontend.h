/* frontend/frontend.h: model importers (ONNX, TorchScript-like text with safetensors weights) into prim graphs. */
#ifndef PRIMC_FRONTEND_H
#define PRIMC_FRONTEND_H

#include "ir/ir.h"

typedef struct pc_dim_binding {
  const char *name; /* ONNX dim_param / symbolic dim name */
  int64_t lo, hi;   /* lo == hi: fixed to that value */
  int64_t step;     /* a range in buckets of step values, each its own program (NAME=LO..HI:STEP); 0: one */
  int64_t multiple; /* a range of multiples of it only (NAME=LO..HI%M: a strided conv's sizes follow them); 0: any */
} pc_dim_binding;

/* a graph input whose value is fixed at compile time (shape-like inputs: axes, pads, sizes): the
 * importer makes it a constant, so ops that need those values at compile time can read them */
typedef struct pc_const_input {
  const char *name;  /* the graph input's name */
  pc_tensor value;   /* rank must match the input's declaration, and every fixed dim; another dtype is
                        converted when every element converts exactly (floats may round) */
  int from_numbers;  /* value is f64 numbers as a user spelled them (rank 0 or 1): shaped to the input's
                        dims (one of them may be unknown) and converted to its dtype */
} pc_const_input;

/* "NAME=N", "NAME=LO..HI", "NAME=LO..HI:STEP", "NAME=LO..HI%M" (LO and HI multiples of M >= 2) or
 * "NAME=LO..HI%M:STEP" (STEP a multiple of M) of --dim into out (out->name points into name): 1, or 0 when s is
 * not that */
int pc_dim_spec_parse(const char *s, pc_dim_binding *out, char *name, size_t name_size);
/* "NAME=VALUE" of --const: VALUE is a number (3, -0.5, true) or a list (1,2,3 or [1,2,3]); out->value is
 * malloc'ed f64 (free it with pc_tensor_free), out->name points into name. 1 on success, else 0 with err set */
int pc_const_spec_parse(const char *spec, pc_const_input *out, char *name, size_t name_size, char *err,
                        size_t errlen);
/* the tensor an input declared dt[dims] (rank -1: not declared; a dim < 0: not fixed) takes for ci: *out's
 * data is ci's own or allocated in g. A value that does not fit fails g naming the input. */
pc_status pc_const_input_fit(pc_graph *g, const char *name, const pc_const_input *ci, pc_dtype dt, int rank,
                             const int64_t *dims, pc_tensor *out);

/* a graph input of sequence or optional type: sequences exist only at import time (lists of
 * values), so their length and element types are fixed at compile time; element k becomes the
 * graph input NAME.k */
typedef struct pc_seq_input {
  const char *name;
  int n;                 /* elements */
  const pc_type *elems;  /* n element types */
  int none;              /* an optional without a value */
  int holds_seq;         /* an optional holding a sequence (n elements) rather than one tensor */
} pc_seq_input;

/* what pc_import_opts.check collects: every node that fails to import, grouped by op and message */
typedef struct pc_check_result {
  int n_problems; /* distinct problems */
  int n_nodes;    /* nodes that failed on their own (not for reading the output of one that failed) */
  int n_skipped;  /* nodes not imported because they read such an output */
  char *report;   /* malloc'ed: one line per problem, "N node(s): MESSAGE: \"a\", \"b\" ..."; free() it */
  void *groups;   /* the importer's own */
} pc_check_result;

typedef struct pc_import_opts {
  const pc_dim_binding *dims; /* --dim name=N or name=LO..HI */
  int n_dims;
  const char *weights_path;   /* text graphs: .safetensors file for constant(key=...) */
  const pc_const_input *consts; /* ONNX: graph inputs specialized to constants (--const-input) */
  int n_consts;
  const pc_seq_input *seqs;     /* ONNX: sequence / optional graph inputs */
  int n_seqs;
  int64_t mem_limit;            /* ONNX: bytes of constants folded at import; 0: none */
  int inputs_only;              /* ONNX: read the graph inputs and stop (primc inputs): no nodes, no outputs */
  pc_check_result *check;       /* ONNX: go on past nodes that fail, collecting them here (primc check); the
                                   graph then fails with the first, and is for reading only */
  int run_time_dims;            /* ONNX: built for codegen's run-time dims: sets the graph's run_time_dims and
                                   folds nothing whose size or value could follow the dims (a Range, a broadcast) */
  int keep_weights;             /* ONNX: for the grad transform (pc_grad): initializers become constants named as in
                                   the model, and import-time folding goes through no float one */
  /* ONNX: the Gradient op's transform, given by a caller that links passes/ (pc_grad_values): the gradient of the
   * sum of y's elements with respect to each wrt[i] into grads[i], built from the graph's nodes so far */
  pc_status (*gradient)(pc_graph *g, pc_value *const *wrt, int nw, pc_value *y, pc_value **grads);
} pc_import_opts;

/* frees what a check collected (not the struct) */
void pc_check_result_free(pc_check_result *r);

/* Each returns a graph (NULL only when out of memory); on failure the graph's
 * status is set and pc_error() names the file and the model node. */
pc_graph *pc_onnx_load(const char *path, const pc_import_opts *opts);
pc_graph *pc_onnx_load_buffer(const void *buf, size_t len, const char *dir, const pc_import_opts *opts);
pc_graph *pc_text_load(const char *path, const pc_import_opts *opts);
/* by extension: .onnx -> ONNX, anything else -> text */
pc_graph *pc_model_load(const char *path, const pc_import_opts *opts);

/* the aten:: op hook of the text frontend, for pc_parse_opts */
pc_status pc_aten_hook(void *ctx, pc_graph *g, const char *op, pc_value *const *in, int n_in,
                       const pc_attr *attrs, int n_attrs, pc_value **out, int n_out);

/* safetensors: binds every constant(key=...) node of g to the file's tensor of that name */
pc_status pc_safetensors_bind(pc_graph *g, const char *path);
/* the same from a safetensors file's bytes in memory; path names it in errors */
pc_status pc_safetensors_bind_buffer(pc_graph *g, const void *data, size_t size, const char *path);
/* writes every keyed constant of g to a safetensors file */
pc_status pc_safetensors_save(const pc_graph *g, const char *path);

#endif
