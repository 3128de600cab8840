/* codegen/kir_internal.h: what the kernel-IR builder's files share (kir.c, kir_expr.c, kir_calls.c,
 * kir_rewrites.c, kir_requant.c, kir_touches.c, kir_pool_calls.c, kir_tile.c,
 * kir_print.c); renderers and packagers use codegen/kir.h only. */
#ifndef PRIMC_KIR_INTERNAL_H
#define PRIMC_KIR_INTERNAL_H

#include "codegen/kir.h"

/* A multi-dim affine map: index of dim d = off[d] + sum_k coef[d][k] * i_k. */
typedef struct amap {
  int rank;
  int64_t off[PC_MAX_RANK];
  int64_t coef[PC_MAX_RANK][KIR_MAX_LOOPS];
} amap;

#define KIR_ALIGN 64 /* of every buffer in the workspace and the weights blob */

static inline int64_t kir_align_up(int64_t x) { return (x + KIR_ALIGN - 1) / KIR_ALIGN * KIR_ALIGN; }


/* ---------------------------------------------------------------- buffers and kernels (kir.c) */

/* t with its symbolic dims at their bound */
pc_type kir_bound_type(const pc_graph *g, const pc_type *t);
int64_t kir_value_bytes(const pc_graph *g, const pc_value *v);
int kir_buf_add(kir_program *p, kir_buf b);
/* scratch space in the workspace past the planned part */
int kir_scratch_buf(kir_program *p, pc_dtype dt, int64_t nbytes, const pc_value *v);
/* scratch that only one call reads and writes, within the call (a conv's im2col): every such buffer starts
 * at one region past the planned part, sized for the largest, placed when the kernels are built */
int kir_call_scratch_buf(kir_program *p, pc_dtype dt, int64_t nbytes);
/* the same after the region is placed (kir_pack_weights): grown in place when it ends the workspace */
int kir_call_scratch_grown(kir_program *p, pc_dtype dt, int64_t nbytes);
/* v gets a buffer of its own (scratch) unless it has one */
void kir_materialize(kir_program *p, const pc_value *v);
kir_kernel *kir_kernel_new(kir_program *p, kir_kkind kind);
void kir_kernel_origin(kir_program *p, kir_kernel *k, const pc_node *const *nodes, int n);
/* used[b] = 1 for every buffer kernel k reads or writes */
void kir_mark_kernel_bufs(const kir_kernel *k, char *used);
/* row-major element strides of a type */
void kir_row_strides(const pc_type *t, int64_t *s);
kir_map kir_linearize(const amap *m, const pc_type *t);
/* identity map of a type's dims onto loops first..first+rank-1 */
amap kir_amap_identity(int rank, int first);
/* maps over loops first.. of a tensor's index space: off + scale*i per dim */
kir_map kir_map_scaled(const pc_type *t, int first, const int64_t *off, const int64_t *scale);
/* drops loop l from a map: the loops after it move down one */
void kir_map_drop_loop(kir_map *m, int l);
/* a plain copy loop kernel: dst[dmap(i)] = src[smap(i)] over extents */
kir_kernel *kir_copy_kernel(kir_program *p, const pc_node *n, int rank, const int64_t *ext, int dst, kir_map dmap,
                            int src, kir_map smap, pc_dtype dt);
/* out[i] = expr(n)(i) over the output's shape */
pc_status kir_build_pointwise(kir_program *p, const pc_node *n);

/* ---------------------------------------------------------------- expressions (kir_expr.c) */

typedef kir_expr *(*kir_expr_fn)(kir_program *p, const pc_node *n, const amap *m);
/* the prims of prims.def's inline column: inlinable into any loop kernel; NULL for the others */
kir_expr_fn kir_expr_rule(pc_op op);
/* v read at m: a load of its buffer, or its producer's expression inlined; NULL when not affine */
kir_expr *kir_expr_value(kir_program *p, const pc_value *v, const amap *m);

/* ---------------------------------------------------------------- runtime calls (kir_calls.c) */

typedef pc_status (*kir_build_fn)(kir_program *p, const pc_node *n);
/* the builder of the runtime call a prim becomes; NULL for prims that are not calls */
kir_build_fn kir_call_builder(pc_op op);
/* the one primc_k_attention call of a group fuse.c made of an attention chain (two dot_generals) */
pc_status kir_build_attention(kir_program *p, const pc_node *const *nodes, int n);
/* a group fuse.c made of a weight gradient over columns read in place (m, from pc_columns_grouped): one
 * primc_k_dot_cols call */
pc_status kir_build_dot_cols(kir_program *p, const pc_columns *m, const pc_node *const *nodes, int n);
/* graph outputs not written in place (inputs, constants, repeated values) get a copy */
pc_status kir_copy_outputs(kir_program *p);
/* a training step updating its state in place (g->state_in_place): each state read only before the kernel
 * writing its next value, or by it at the element it stores; PC_ERR_INTERNAL naming the state otherwise */
pc_status kir_check_state_in_place(kir_program *p);
/* A 2-D f32 conv call's row (runtime/conv/plan.c), for plain or packed weights */
/* packable: 0 (weights as they are), 1 (constants packed at compile time) or KIR_PACK_PER_CALL (computed weights the
 * call packs: what a batch's tiles repay is weighed per image) */
#define KIR_PACK_PER_CALL 2
int kir_conv_plan(const kir_program *p, int node, const primc_conv2d *c, int packable, primc_conv_plan *plan);
/* the id of the graph node a kernel was built for (its first), -1 when none */
int kir_kernel_node(const kir_kernel *k);

/* ---------------------------------------------------------------- what kernels touch (kir_touches.c) */

/* How many kernels read or write each buffer, so that kir_touched_outside looks at its window only: a scan of
 * every kernel per candidate was quadratic (a GRU of 1,000 steps unrolls to thousands of dots). A rewrite
 * builds it when it starts and recounts a kernel it changes (kir_touches_recount before and after). */
typedef struct kir_touches {
  int *n;    /* by buffer */
  int *seen; /* by buffer: the stamp of the last kernel counted there */
  int stamp;
} kir_touches;
/* whether map m is offset + strides[l] * i_l over n loops (0 beyond) */
int kir_map_is(const kir_map *m, const int64_t *strides, int n, int64_t offset);
/* whether expressions a and b compute the same value the same way (same tree, loads, constants) */
int kir_expr_equal(const kir_expr *a, const kir_expr *b);
/* whether expression e loads buf (1); *other_map |= 1 when a load of it is not element (i0, i1) of rows n_cols long */
int kir_expr_reads(const kir_expr *e, int buf, int64_t n_cols, int *other_map);
/* whether loop or call kernel k reads or writes buf */
int kir_kernel_touches(const kir_kernel *k, int buf);
pc_status kir_touches_build(kir_program *p, kir_touches *t);
void kir_touches_recount(kir_touches *t, const kir_kernel *k, int sign);
void kir_touches_free(kir_touches *t);
/* whether a kernel outside [first, last] reads or writes buf */
int kir_touched_outside(const kir_program *p, const kir_touches *t, int buf, int first, int last);

/* ---------------------------------------------------------------- rewrites (kir_rewrites.c) */

/* when a rewrite runs: every kir_build, or on request of a host or cross CPU compile */
typedef enum kir_stage { KIR_STAGE_BUILD, KIR_STAGE_HOST_WEIGHTS, KIR_STAGE_CROSS_WEIGHTS, KIR_STAGE_HOST_POOLS } kir_stage;
/* runs the rewrites of one stage, in the list's order */
pc_status kir_rewrites_run(kir_program *p, kir_stage stage);
/* call i runs the loop kernel after it itself (from the words and args the rewrite gave it): that kernel absorbed */
void kir_absorb_in_call(kir_program *p, int i);
/* a load map of loop kernel k that depends on the output channel only, where k's loops walk an NCHW result
 * element by element (cstride: their row-major strides; plane pixels a channel, chans channels): its offset and
 * its stride per channel in *off and *stride; 0 when it is not one */
int kir_channel_map(const kir_kernel *k, const int64_t *cstride, int64_t plane, int64_t chans, const kir_map *m,
                    int64_t *off, int64_t *stride);
/* the loop kernel requantizing a conv_i8 call's int32 result runs inside the call (kir_requant.c) */
pc_status kir_requant_rewrite(kir_program *p);
pc_status kir_conv_requant_rewrite(kir_program *p);
/* max trees over a -inf padded copy as primc_k_maxpool calls (kir_pool_calls.c) */
pc_status kir_pool_calls_rewrite(kir_program *p);
/* transposing loop kernels split in blocks of loops (kir_tile.c) */
pc_status kir_tile_transposes(kir_program *p);
/* --autocast bf16's maps between convs held as bf16 channel pairs where only convs touch them (kir_pairs.c) */
pc_status kir_conv_pairs(kir_program *p);
/* conv call i whose per-call packed weights (lanes, Winograd) a loop kernel flipped out of another conv's reads those
 * instead, the flip absorbed (kir_flip.c); 1 when it did */
int kir_conv_read_flipped(kir_program *p, int i);

#endif
