/* frontend/onnx_internal.h: the API the ONNX op decompositions (frontend/onnx_<concern>.c) are written against. */
#ifndef PRIMC_ONNX_INTERNAL_H
#define PRIMC_ONNX_INTERNAL_H

#include "frontend/composite.h"
#include "frontend/frontend.h"
#include "ir/ir.h"
#include "onnx.pb-c.h"

#define OX_MAX_NUMEL ((int64_t)1 << 31) /* larger tensors are absurd for this compiler */
#define OX_MAX_UNROLL 4096 /* steps a Loop, Scan, RNN or LinearAttention may unroll into */

/* The state of one ONNX node while it is being decomposed. A decomposition
 * reads inputs and attributes through the ox_ helpers below, builds prims on
 * c->g, and sets every output with ox_out. Inputs given as "" (omitted
 * optional inputs) read as NULL. */
typedef struct ox_ctx {
  pc_graph *g;
  const Onnx__NodeProto *node;
  const char *op_type;
  int opset;        /* version of the node's domain in the model's opset_import */
  int n_in;
  pc_value **in;    /* NULL entries for omitted optional inputs */
  int n_out;
  pc_value **out;   /* filled by the decomposition; NULL allowed for unused optional outputs */
  const char *dir;  /* model directory (tensor attributes with external data) */
  struct ox_loader *L; /* the importer's name scope (control flow and sequences, frontend/onnx_cf.c) */
} ox_ctx;

/* Max pools of stride 1 with "same" padding compose: pool_a(pool_b(x)) = pool_{a+b-1}(x), exactly (the windows'
 * union, -inf outside). The importer remembers those it imported per operand, so that SPP's pools 5, 9 and 13
 * of one map become 5, then 5 of that, then 5 of that (frontend/onnx_pool.c, ox_op_MaxPool). */
#define OX_POOL_MEMO 16
typedef struct ox_pool_memo {
  const pc_value *x;
  pc_value *y;
  int ns;
  int64_t k[PC_MAX_RANK];
} ox_pool_memo;
/* the remembered pool of x with the largest kernel no larger than k in every dim: 1 and *found, else 0 */
int ox_pool_find(ox_ctx *c, const pc_value *x, int ns, const int64_t *k, ox_pool_memo *found);
void ox_pool_note(ox_ctx *c, const pc_value *x, int ns, const int64_t *k, pc_value *y);

/* A decomposition: returns PC_OK or the graph's error status. */
typedef pc_status (*ox_fn)(ox_ctx *c);

/* One row per ONNX op and opset range, see frontend/onnx_ops.def. */
#define ONNX_OP(name, min_opset, max_opset, fn) pc_status fn(ox_ctx *c);
#define ONNX_ML_OP(name, min_opset, max_opset, fn) pc_status fn(ox_ctx *c);
#define ONNX_PREVIEW_OP(name, min_opset, max_opset, fn) pc_status fn(ox_ctx *c);
#define ONNX_TRAINING_OP(name, min_opset, max_opset, fn) pc_status fn(ox_ctx *c);
#define ONNX_MS_OP(name, min_opset, max_opset, fn) pc_status fn(ox_ctx *c);
#include "frontend/onnx_ops.def"
#undef ONNX_OP
#undef ONNX_ML_OP
#undef ONNX_PREVIEW_OP
#undef ONNX_TRAINING_OP
#undef ONNX_MS_OP

/* ---- the wire format (frontend/onnx_wire.c), checked before protobuf-c unpacks it, whose unpack recurses
 * once per nested message: a model nests ~3 messages per If/Loop body level and ~2 per sequence type level,
 * and real models nest bodies 5-10 deep, so 128 levels is generous and keeps protobuf-c's stack small */
#define OX_MAX_MSG_DEPTH 128
/* PC_OK when buf is well-formed wire data for message d nesting messages at most max_depth deep; else
 * PC_ERR_RANGE (too deep) or PC_ERR_PARSE (malformed) with a one-line reason in msg */
pc_status ox_wire_check(const uint8_t *buf, size_t len, const ProtobufCMessageDescriptor *d, int max_depth,
                        char *msg, size_t cap);

/* A model's large weights stay where they are (the mapped file) instead of being copied by protobuf-c's unpack:
 * the main graph's initializers whose raw_data has at least min_len bytes are left out of a copy of the
 * model, and refs[i] points at initializer i's raw_data in buf (NULL where it was kept). out->buf is NULL
 * when nothing was left out (or the data is malformed: unpack buf itself then). */
typedef struct ox_raw_ref {
  const uint8_t *data;
  size_t len;
} ox_raw_ref;
typedef struct ox_wire_stripped {
  uint8_t *buf; /* malloc'ed */
  size_t len;
  ox_raw_ref *refs; /* malloc'ed, n_refs */
  size_t n_refs;
} ox_wire_stripped;
pc_status ox_wire_strip(const uint8_t *buf, size_t len, size_t min_len, ox_wire_stripped *out, char *msg, size_t cap);

/* The helpers from here to the tensors are defined in frontend/onnx_helpers.c (ox_dyn_qmatmul: onnx_quant.c). */

/* ---- errors: the message is prefixed with the node (g->origin, e.g. `Slice "s1"`) */
pc_status ox_fail(ox_ctx *c, pc_status code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* returns the graph's status (PC_OK when nothing failed): `return ox_status(c);` ends a decomposition */
pc_status ox_status(ox_ctx *c);

/* ---- inputs and outputs */
pc_value *ox_in(ox_ctx *c, int i);     /* NULL when absent/omitted (no error) */
pc_value *ox_in_req(ox_ctx *c, int i); /* fails naming the node when absent */
int ox_has_in(ox_ctx *c, int i);
/* sets output i (ignores outputs the node does not declare); returns the graph status */
pc_status ox_out(ox_ctx *c, int i, pc_value *v);
int ox_has_out(ox_ctx *c, int i);       /* output i is declared and named (not "") */

/* ---- attributes: defaults when absent */
int ox_has_attr(ox_ctx *c, const char *name);
int64_t ox_attr_int(ox_ctx *c, const char *name, int64_t dflt);
/* a boolean attribute: any value but 0 or 1 fails the node (a cast to int read 2^32 as 0) */
int ox_attr_flag(ox_ctx *c, const char *name, int dflt);
/* a dtype attribute (Cast's to, EyeLike's dtype, ...) read as int64: 1, with dflt when absent; 0 after failing
 * the node for a type primc does not have */
int ox_attr_dtype(ox_ctx *c, const char *name, pc_dtype dflt, pc_dtype *out);
double ox_attr_float(ox_ctx *c, const char *name, double dflt);
const char *ox_attr_str(ox_ctx *c, const char *name, const char *dflt); /* graph-owned copy */
/* INTS/FLOATS: copies up to max entries into out, returns the count, -1 when absent (no error),
 * fails (PC_ERR_RANGE, returns -2) when the list is longer than max */
int ox_attr_ints(ox_ctx *c, const char *name, int64_t *out, int max);
/* exactly n ints (read with room for cap >= n, so a longer list is reported with its length), or n copies of
 * dflt when absent; 0 on failure (the graph holds the error) */
int ox_attr_ints_n(ox_ctx *c, const char *name, int64_t *out, int n, int cap, int64_t dflt);
int ox_attr_floats(ox_ctx *c, const char *name, double *out, int max);
/* TENSOR attribute as a constant value; NULL when absent (no error) or on failure (graph status set) */
pc_value *ox_attr_tensor(ox_ctx *c, const char *name);

/* ---- constant inputs (shape tensors, axes, pads, k...): inputs whose producer is a prim constant.
 * Each returns the element count read, -1 when input i is absent (no error), and -2 on failure
 * (not a compile-time constant -> PC_ERR_UNSUPPORTED naming the node; too many -> PC_ERR_RANGE). */
int ox_const_ints(ox_ctx *c, int i, int64_t *out, int max);
int ox_const_floats(ox_ctx *c, int i, double *out, int max);
/* int64_t/double reading of any constant's data, whatever its dtype (elements count numel) */
int ox_value_ints(ox_ctx *c, const pc_value *v, int64_t *out, int max);

/* ---- axes */
/* normalizes a possibly negative axis into [0, rank); fails (PC_ERR_ATTR) and returns -1 when out of range */
int ox_axis(ox_ctx *c, int64_t axis, int rank);
/* normalizes each of n axes in place; 0 on failure */
int ox_axes(ox_ctx *c, int64_t *axes, int n, int rank);

/* ---- broadcasting and building helpers (numpy rules; no implicit type promotion) */
/* broadcasts two operands to their common shape, fails naming the node; 0 on failure */
int ox_broadcast2(ox_ctx *c, pc_value **a, pc_value **b);
int ox_broadcast3(ox_ctx *c, pc_value **a, pc_value **b, pc_value **d);
/* elementwise binary prim op on numpy-broadcast operands of the same dtype */
pc_value *ox_binary(ox_ctx *c, pc_op op, pc_value *a, pc_value *b);
/* a constant v of x's dtype broadcast to x's shape */
pc_value *ox_like(ox_ctx *c, double v, const pc_value *x);
/* x converted to dtype to; saturate (ONNX Cast, QuantizeLinear) clips to an f8 type's finite range first */
pc_value *ox_convert(ox_ctx *c, pc_value *x, pc_dtype to, int saturate);
/* ox_convert with ONNX Cast's round_mode for FLOAT8E8M0 ("up", "down" or "nearest"; other targets ignore it) */
pc_value *ox_convert_rounded(ox_ctx *c, pc_value *x, pc_dtype to, int saturate, const char *round_mode);
/* reshape keeping data order, dims given explicitly (n dims) */
pc_value *ox_reshape(ox_ctx *c, pc_value *x, int n, const int64_t *dims);
/* inserts a size-1 dim at each (sorted, normalized) axis of the output */
pc_value *ox_unsqueeze(ox_ctx *c, pc_value *x, int n_axes, const int64_t *axes);
/* reduction keeping reduced dims as 1 when keepdims */
pc_value *ox_reduce(ox_ctx *c, pc_op op, pc_value *x, int n_axes, const int64_t *axes, int keepdims);
/* a [..., K] (f32) times wq [K, N] (u8 or i8 less wz) as ONNX Runtime's dynamically quantized GEMMs compute it (its
 * quantize_dynamic'd LSTM): a quantized to u8 as DynamicQuantizeLinear does over all of a, the exact int32 product,
 * times a's scale times ws; ws and wz one value or one per column (onnx_quant.c) */
pc_value *ox_dyn_qmatmul(ox_ctx *c, pc_value *a, pc_value *wq, pc_value *ws, pc_value *wz);
/* requires x's dtype to be a float type; fails naming the node otherwise */
int ox_require_float(ox_ctx *c, const pc_value *x);

/* ---- small builders the op files share (frontend/onnx_builders.c) */
/* x * s and x + s with s a constant of x's dtype; NULL when x is NULL */
pc_value *ox_mul_s(ox_ctx *c, pc_value *x, double s);
pc_value *ox_add_s(ox_ctx *c, pc_value *x, double s);
/* the iota prim: each element's index along axis of a tensor of the given shape, in dtype dt */
pc_value *ox_iota(ox_ctx *c, pc_dtype dt, int rank, const int64_t *shape, int axis);
/* the axes of a reduction-like op: an attribute before opset input_from, input 1 from then on (ox_attr_ints' counts) */
int ox_read_axes(ox_ctx *c, int input_from, int64_t *axes);
/* the product of n dims */
int64_t ox_shape_numel(int n, const int64_t *d);
/* 1 when x's shape is static; else 0, failing the node ("needs a static shape") unless x is NULL */
int ox_check_static(ox_ctx *c, const pc_value *x);

/* a constant of dtype dt from the doubles v: built as f64 and converted, so every float dtype works */
pc_value *ox_const_of(ox_ctx *c, pc_dtype dt, int rank, const int64_t *dims, const double *v);
/* v, a vector, broadcast along dim axis of a tensor of the given shape; NULL when v is NULL */
pc_value *ox_along(ox_ctx *c, pc_value *v, int rank, const int64_t *dims, int64_t axis);
/* a per-channel parameter p ([C]) broadcast to x's shape on dim 1 in x's dtype; fails the node when p is no [C] */
pc_value *ox_per_channel(ox_ctx *c, pc_value *p, const pc_value *x, const char *what);
/* ox_check_static, failing with the wording most op files use: "needs a static input shape" */
int ox_check_static_input(ox_ctx *c, const pc_value *x);
/* 1 when x's rank is in [lo, hi]; else 0, failing the node unless x is NULL */
int ox_check_rank(ox_ctx *c, const pc_value *x, int lo, int hi);
/* the product of n dims; OX_MAX_NUMEL + 1 when it is larger (or overflows) */
int64_t ox_dims_prod(const int64_t *d, int n);
/* a scalar constant of dtype dt */
pc_value *ox_scalar(ox_ctx *c, pc_dtype dt, double v);
/* the binary prim op on a and a scalar s of a's dtype (numpy-broadcast); NULL when a is NULL */
pc_value *ox_binary_s(ox_ctx *c, pc_op op, pc_value *a, double s);
/* where(cond, a, b) with numpy broadcasting of all three */
pc_value *ox_where(ox_ctx *c, pc_value *cond, pc_value *a, pc_value *b);

/* ---- the sliding-window geometry of Conv and the pools (frontend/onnx_window.c) */
#define OX_NS_MAX (PC_MAX_RANK - 2) /* spatial dims after N and C */
typedef struct ox_geom {
  int ns;
  int64_t in[OX_NS_MAX], k[OX_NS_MAX], s[OX_NS_MAX], d[OX_NS_MAX], lo[OX_NS_MAX], hi[OX_NS_MAX], out[OX_NS_MAX];
} ox_geom;
/* the extent of the dilated kernel along spatial dim i */
int64_t ox_span_of(const ox_geom *g, int i);
/* reads x's window (kernel given, or the kernel_shape attribute), strides, dilations, pads and auto_pad into g;
 * 0 after failing the node */
int ox_geom_read(ox_ctx *c, const pc_value *x, const int64_t *kernel, int ceil_mode, ox_geom *g);
/* the p-norm pieces LpPool and GlobalLpPool share with LpNormalization, and the spatial axes InstanceNormalization
 * reads too (frontend/onnx_pool.c) */
pc_value *ox_abs_pow(ox_ctx *c, pc_value *x, int64_t p); /* |x|^p (x * x for p = 2) */
pc_value *ox_root(ox_ctx *c, pc_value *x, int64_t p);    /* the p-th root of x (x itself for p = 1) */
/* axes 2 .. rank-1 of x into axes, their count returned; -1 after failing the node when x's rank is below 2 */
int ox_spatial_axes(ox_ctx *c, const pc_value *x, int64_t *axes);

/* ---- tensors (frontend/onnx_tensor.c; importer + conformance runner share this decoding) */
/* decodes a TensorProto (all storage forms, external data under dir) into a malloc'ed pc_tensor;
 * errors go to g with the tensor's name */
pc_status ox_tensor_decode(pc_graph *g, const Onnx__TensorProto *tp, const char *dir, pc_tensor *out);
/* maps an ONNX TensorProto data_type to a prim dtype; 0 when unsupported */
int ox_dtype_from_onnx(int64_t onnx_type, pc_dtype *out);
const char *ox_onnx_type_name(int onnx_type); /* "float", "int64", ...; "unknown" */
/* a value name defined twice, or a graph input whose initializer (its default) has another type:
 * errors ONNX Runtime gives too (frontend/onnx_validate.c); scope prefixes a subgraph's messages */
pc_status ox_validate_graph(pc_graph *g, const Onnx__GraphProto *gp, const char *scope);
/* gp's initializer named name, NULL when none */
const Onnx__TensorProto *ox_initializer_of(const Onnx__GraphProto *gp, const char *name);

/* ---- control flow and sequences (frontend/onnx_cf.c; scopes implemented in frontend/onnx.c)
 * A sequence or an optional exists only at import time: a list of values bound to an ONNX name
 * beside the tensor names. Sequence inputs of a node read as NULL in c->in; ox_seq_in finds them. */
typedef struct ox_seq {
  int n;            /* elements */
  pc_value **items; /* graph-owned */
  int optional;     /* an optional: empty (none), or holding one tensor (n == 1) or a sequence (holds_seq) */
  int none;
  int holds_seq;
} ox_seq;

/* the tensor / sequence bound to an ONNX name; NULL when none */
pc_value *ox_name_get(ox_ctx *c, const char *name);
/* the options the model is imported with (NULL: none) */
const pc_import_opts *ox_import_opts(ox_ctx *c);
const ox_seq *ox_seq_get(ox_ctx *c, const char *name);
/* binds a name to a tensor, or to a sequence (items copied), unbinding the other kind */
pc_status ox_name_put(ox_ctx *c, const char *name, pc_value *v);
pc_status ox_seq_put(ox_ctx *c, const char *name, const ox_seq *s);
/* the sequence node input i names; NULL when it is no sequence */
const ox_seq *ox_seq_in(ox_ctx *c, int i);
/* binds output i to a sequence (ignored when the node does not name output i) */
pc_status ox_seq_out(ox_ctx *c, int i, const ox_seq *s);
/* the GRAPH attribute `name`; NULL when absent */
const Onnx__GraphProto *ox_attr_graph(ox_ctx *c, const char *name);
/* imports a subgraph's initializers and nodes into c->g (outer names stay visible); the caller
 * binds its formal inputs first and reads its outputs by name after. Node origins inside read
 * "<this node><scope>/<inner node>". Restores c's node as the origin. */
pc_status ox_import_body(ox_ctx *c, const Onnx__GraphProto *body, const char *scope);

/* primc check (frontend/onnx_check.c): a node's failure noted, grouped by its message less the origin prefix;
 * the report written at the end. 0 when out of memory. */
int ox_check_note(pc_check_result *r, const char *origin, const char *node, const char *message);
int ox_check_finish(pc_check_result *r);
/* Identity on a sequence or an optional (ox_op_Identity calls it when its input is one) */
pc_status ox_op_SequenceIdentity(ox_ctx *c);

#endif
