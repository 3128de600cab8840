/* passes/passes.h: graph-to-graph passes, fusion and memory planning, and the -O pipelines. */
#ifndef PRIMC_PASSES_H
#define PRIMC_PASSES_H

#include "ir/ir.h"

/* One pass per file, each `pc_status pc_pass_NAME(pc_graph *)`; the table
 * passes/passes.def lists them (name, description) for --print-after. */
/* Bounds of one fused kernel (passes/fuse.c), so that codegen, which walks a kernel's expressions
 * recursively, does work and stack linear in the model: its prims, and the prims its expressions
 * instantiate (a value read twice in the kernel is computed twice) */
#define PC_FUSE_MAX_PRIMS 256
#define PC_FUSE_MAX_EXPANDED 2048

#define PC_PASS(name, desc) pc_status pc_pass_##name(pc_graph *g);
#include "passes/passes.def"
#undef PC_PASS

typedef struct pc_pipeline_opts {
  int opt_level;           /* 0..3 */
  int unfused;             /* one kernel per prim */
  int print_after_all;     /* print IR after each pass to `print_to` */
  const char *print_after; /* print IR after the named pass */
  FILE *print_to;
} pc_pipeline_opts;

/* Runs the passes of the -O level, then fusion (or one group per node when
 * unfused) and memory planning; leaves node->group, value->storage/offset
 * and g->workspace_size set for codegen. */
pc_status pc_pipeline_run(pc_graph *g, const pc_pipeline_opts *opts);

/* Why the fuser kept producer and consumer apart: one line per adjacent
 * pair in different groups, appended to `out` (NULL-terminated lines in a
 * malloc'ed string the caller frees). */
char *pc_explain_fusion(const pc_graph *g);

/* Conventions of fuse/unfuse and memplan (codegen reads them):
 * - constants are not kernels: group -1, storage CONST; fuse moves them ahead
 *   of every group so each group's nodes stay contiguous in g->nodes;
 * - groups are numbered 0..n_groups-1 in g->nodes order, which stays topological;
 * - node->unfused_reason: one line per operand, the reason that operand's
 *   producer (a kernel) was not fused into this node's group, "" otherwise;
 * - storage: inputs INPUT; kernel-computed graph outputs OUTPUT (an output
 *   that is an input, a constant or listed twice keeps its storage and is
 *   copied by codegen); FUSED = computed inline where read (producer and every
 *   reader in one group, producer an inline prim: elementwise, convert,
 *   broadcast_in_dim, transpose, slice, rev, reshape, iota; readers inline or
 *   reductions); everything else WORKSPACE at a 64-byte aligned offset, planned
 *   by liveness over the group order (in-place reuse by elementwise kernels). */

/* Reverse mode (passes/autodiff.c): rewrites g in place into its vector-Jacobian product, before the
 * pipeline. After the model's inputs come one cotangent input per float output ("grad_<output>"); after
 * the model's outputs, one gradient output per differentiated value ("grad_<value>"). wrt names the
 * values to differentiate (graph inputs, or weights by key); none given: every float input, then every
 * float weight in graph order. A weight is a constant with a key: a text graph's key= constants, ONNX
 * initializers imported with keep_weights. A gradient that must pass a prim with no
 * rule (passes/transforms.def) fails the graph naming the model node. */
typedef struct pc_grad_opts {
  const char *const *wrt;
  int n_wrt;
} pc_grad_opts;
pc_status pc_grad(pc_graph *g, const pc_grad_opts *opts);
/* the gradient of the sum of y's elements with respect to each wrt[i] into grads[i] (zeros where y does not
 * depend on it), built from the graph's nodes so far: ONNX's Gradient op (pc_import_opts.gradient) */
pc_status pc_grad_values(pc_graph *g, pc_value *const *wrt, int nw, pc_value *y, pc_value **grads);
/* Forward mode (passes/jvp.c): rewrites g in place into its Jacobian-vector product. After the model's
 * inputs come one tangent input per differentiated input ("tangent_<input>": opts->wrt names them, else every
 * float input); after its outputs, one tangent output per float output ("tangent_<output>"). Composes with
 * pc_grad: pc_jvp of a gradient graph gives Hessian-vector products. */
pc_status pc_jvp(pc_graph *g, const pc_grad_opts *opts);
/* Batching (passes/vmap.c): the named inputs take a leading batch dim of size batch, every prim they reach
 * is rebuilt to carry it (passes/transforms.def's vmap column), and every output gets it (an output no
 * batched input reaches is broadcast): one run computes the model for each batch entry. */
typedef struct pc_vmap_opts {
  const char *const *inputs;
  int n_inputs;
  int64_t batch;
} pc_vmap_opts;
pc_status pc_vmap(pc_graph *g, const pc_vmap_opts *opts);

/* A training step (passes/train.c), after import (with keep_weights) and before the pipeline: the float
 * weights become state inputs, the loss reads the first output against a new input named opts->label (the
 * output's type for mse, i64 class indices [N] for cross_entropy over logits [N, C]), and the optimizer's
 * update gives each state its next value. Inputs: the model's, the label, then the state (weights, the
 * optimizer's buffers per weight, Adam's step). Outputs: "loss", the model's, then "next.NAME" per state.
 * g->n_state, n_state_weights and state_init describe the state (ir/ir.h). */
typedef enum pc_loss { PC_LOSS_MSE, PC_LOSS_CROSS_ENTROPY, PC_LOSS_COUNT } pc_loss;
typedef enum pc_optim { PC_OPTIM_SGD, PC_OPTIM_MOMENTUM, PC_OPTIM_ADAM, PC_OPTIM_ADAMW, PC_OPTIM_COUNT } pc_optim;
typedef struct pc_train_opts {
  int loss, optimizer;  /* a pc_loss, a pc_optim */
  const char *label;    /* the label input's name */
  double lr, weight_decay, momentum, beta1, beta2, eps;
} pc_train_opts;
void pc_train_opts_default(pc_train_opts *o); /* mse, sgd, "label", lr 1e-3, momentum 0.9, betas 0.9 0.999, eps 1e-8 */
pc_status pc_train(pc_graph *g, const pc_train_opts *opts);
int pc_loss_parse(const char *s);  /* -1 when s names none */
int pc_optim_parse(const char *s); /* -1 when s names none */
const char *pc_loss_name(int l);
const char *pc_optim_name(int o);

/* The transforms a compile asks for (passes/transforms.c), applied after import and before the pipeline in
 * one order: vmap, then grad, then jvp; or a training step alone. Import with keep_weights when grad or
 * train is set. */
typedef struct pc_transforms {
  const char *vmap_inputs; /* "x,y": inputs to batch, vmap_batch > 0 */
  int64_t vmap_batch;
  int grad, jvp, train;
  pc_train_opts train_opts; /* train only */
} pc_transforms;
pc_status pc_apply_transforms(pc_graph *g, const pc_transforms *t);

/* Per-kernel table of live workspace bytes, then the peak and the tensors live
 * at it (for `primc compile --report`); malloc'ed, caller frees; NULL when out of memory. */
char *pc_memplan_report(const pc_graph *g);

#endif
