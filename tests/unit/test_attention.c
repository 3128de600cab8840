/* tests/unit/test_attention.c: the fused attention call (ir/attention.c, passes/fuse.c, runtime/attention.c):
 * attention graphs over edge shapes compiled and compared with the interpreter, the call present and no
 * Sq x Sk value stored; -O0 and --unfused keep today's kernels; the runtime's AVX-512 and plain C rows
 * against a double reference on strided operands. */
#include "codegen/codegen.h"
#include "frontend/composite.h"
#include "passes/passes.h"
#include "runtime/primc_rt.h"
#include "tests/test.h"
#include "tests/unit/cuda_emu.h"
#include "tests/unit/helpers.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static uint64_t seed = 0x9e3779b97f4a7c15ull;
static float frand(void) {
  seed ^= seed << 13, seed ^= seed >> 7, seed ^= seed << 17;
  return (float)((double)(seed >> 11) / 9007199254740992.0 * 2 - 1);
}

typedef struct shape {
  const char *tag;
  int64_t B, H, Sq, Sk, D, Dv;
  int heads_split; /* Q, K, V arrive as [B, S, H*D] and are split and transposed (the encoder's form) */
  int mask;        /* 1: an additive [B, 1, 1, Sk] padding mask broadcast; 2: a full [B, H, Sq, Sk] one; 3: a
                      uniform constant (ONNX FlexAttention's score_mod test) */
  int causal;
  int rank3;       /* [B*H, S, D] operands, no head dims */
} shape;

/* Q [.., Sq, D] from x [B, Sq, H*D]: split the heads, move them before the sequence */
static pc_value *heads(pc_graph *g, pc_value *x, int64_t B, int64_t S, int64_t H, int64_t D) {
  int64_t d4[4] = {B, S, H, D}, perm[4] = {0, 2, 1, 3};
  return pc_transpose(g, pc_reshape(g, x, 4, d4), perm);
}

static pc_graph *build(const shape *s) {
  pc_graph *g = pc_graph_new();
  int64_t B = s->B, H = s->H;
  pc_value *q, *k, *v, *m = NULL;
  if (s->heads_split) {
    q = heads(g, pc_input_add(g, "q", pc_type_make(PC_f32, 3, (int64_t[]){B, s->Sq, H * s->D})), B, s->Sq, H, s->D);
    k = heads(g, pc_input_add(g, "k", pc_type_make(PC_f32, 3, (int64_t[]){B, s->Sk, H * s->D})), B, s->Sk, H, s->D);
    v = heads(g, pc_input_add(g, "v", pc_type_make(PC_f32, 3, (int64_t[]){B, s->Sk, H * s->Dv})), B, s->Sk, H, s->Dv);
    k = pc_transpose(g, k, (int64_t[]){0, 1, 3, 2}); /* K^T as the exporters write it: MatMul(Q, K^T) */
  } else if (s->rank3) {
    q = pc_input_add(g, "q", pc_type_make(PC_f32, 3, (int64_t[]){B * H, s->Sq, s->D}));
    k = pc_input_add(g, "k", pc_type_make(PC_f32, 3, (int64_t[]){B * H, s->Sk, s->D}));
    v = pc_input_add(g, "v", pc_type_make(PC_f32, 3, (int64_t[]){B * H, s->Sk, s->Dv}));
  } else {
    q = pc_input_add(g, "q", pc_type_make(PC_f32, 4, (int64_t[]){B, H, s->Sq, s->D}));
    k = pc_input_add(g, "k", pc_type_make(PC_f32, 4, (int64_t[]){B, H, s->Sk, s->D}));
    v = pc_input_add(g, "v", pc_type_make(PC_f32, 4, (int64_t[]){B, H, s->Sk, s->Dv}));
  }
  int r = q->type.rank;
  if (s->mask == 1) m = pc_input_add(g, "mask", pc_type_make(PC_f32, 4, (int64_t[]){B, 1, 1, s->Sk}));
  if (s->mask == 2) m = pc_input_add(g, "mask", pc_type_make(PC_f32, 4, (int64_t[]){B, H, s->Sq, s->Sk}));
  int64_t bd[2] = {0, 1}, lc = r - 1, rc = s->heads_split ? r - 2 : r - 1, pc = r - 1, vc = r - 2;
  pc_value *sc = pc_dot_general(g, q, k, 1, &lc, &rc, r - 2, bd, bd);
  /* scale as the encoder divides by sqrt(D) */
  sc = pc_div(g, sc, pc_broadcast_to(g, pc_scalar(g, PC_f32, sqrt((double)s->D)), r, sc->type.dims));
  if (s->causal) {
    int64_t ls[2] = {s->Sq, s->Sk};
    pc_attr ra[3] = {pc_a_dtype("dtype", PC_i64), pc_a_ints("shape", ls, 2), pc_a_int("axis", 0)};
    pc_attr ca[3] = {pc_a_dtype("dtype", PC_i64), pc_a_ints("shape", ls, 2), pc_a_int("axis", 1)};
    pc_value *keep = pc_ge(g, pc_build(g, PC_OP_iota, NULL, 0, ra, 3), pc_build(g, PC_OP_iota, NULL, 0, ca, 3));
    pc_value *ninf = pc_broadcast_to(g, pc_scalar(g, PC_f32, -INFINITY), r, sc->type.dims);
    sc = pc_where(g, pc_broadcast_to(g, keep, r, sc->type.dims), sc, ninf);
  }
  if (s->mask == 3) m = pc_full_like(g, 0.5, sc); /* a constant codegen reads as one value, not a load */
  if (m) sc = pc_add(g, sc, pc_broadcast_to(g, m, r, sc->type.dims));
  pc_output_add(g, pc_dot_general(g, fc_softmax(g, sc, r - 1, 0), v, 1, &pc, &vc, r - 2, bd, bd));
  return g;
}

static pc_tensor input_of(const pc_value *v, int mask) {
  pc_tensor t = {PC_f32, v->type.rank, {0}, NULL};
  memcpy(t.dims, v->type.dims, sizeof t.dims);
  int64_t n = pc_tensor_numel(&t);
  float *d = calloc((size_t)n + 1, sizeof *d);
  /* a padding mask: the last keys of each row masked (-inf or a large negative, as BERT's) */
  for (int64_t i = 0; i < n; i++) d[i] = mask ? (i % t.dims[t.rank - 1] >= t.dims[t.rank - 1] * 3 / 4 + 1 ? (i & 1 ? -INFINITY : -1e4f) : frand()) : frand() * 2;
  t.data = d;
  return t;
}

/* the program's workspace values of the pipeline run: none of Sq x Sk or more elements per head */
static int stores_scores(const pc_graph *g, const shape *s) {
  for (int i = 0; i < g->n_values; i++) {
    const pc_value *v = g->values[i];
    if (v->storage == PC_STORE_WORKSPACE && v->type.rank >= 2 && v->type.dims[v->type.rank - 2] == s->Sq &&
        v->type.dims[v->type.rank - 1] == s->Sk)
      return 1;
  }
  return 0;
}

/* compiled at opt/unfused (emulated: rendered as CUDA and run on the CPU emulator of CUDA C, tests/unit/cuda_emu.h)
 * against the interpreter; *fused: whether the program holds the attention call. 1 when it matched, 0 when not,
 * -1 when the emulator has no compiler here */
static int check_shape_on(const shape *s, int opt, int unfused, int *fused, int emulated) {
  pc_graph *g = build(s);
  if (!CHECK_MSG(g->status == PC_OK, "%s: build: %s", s->tag, pc_error(g))) return pc_graph_free(g), 0;
  pc_tensor ins[4], ref[1], got[1];
  memset(ref, 0, sizeof ref), memset(got, 0, sizeof got);
  for (int i = 0; i < g->n_inputs; i++) ins[i] = input_of(g->inputs[i], s->mask && i == 3);
  int ok = CHECK_MSG(pc_interp(g, ins, g->n_inputs, ref, 1) == PC_OK, "%s: interp: %s", s->tag, pc_error(g));
  pc_pipeline_opts po = {.opt_level = opt, .unfused = unfused};
  ok = ok && CHECK_MSG(pc_pipeline_run(g, &po) == PC_OK, "%s: passes: %s", s->tag, pc_error(g));
  char *text = ok ? pc_test_kernels_text(g) : NULL;
  *fused = text && strstr(text, "primc_k_attention") != NULL;
  free(text);
  if (*fused) ok = CHECK_MSG(!stores_scores(g, s), "%s: an Sq x Sk value is stored beside the attention call", s->tag) && ok;
  int r = 1;
  if (ok && emulated) {
    char err[512] = "";
    void *in[4];
    for (int i = 0; i < g->n_inputs; i++) in[i] = ins[i].data;
    got[0] = (pc_tensor){PC_f32, ref[0].rank, {0}, calloc((size_t)pc_tensor_numel(&ref[0]) + 1, sizeof(float))};
    memcpy(got[0].dims, ref[0].dims, sizeof got[0].dims);
    r = pc_emu_graph(g, in, &got[0].data, NULL, err, sizeof err);
    ok = r < 0 ? 0 : CHECK_MSG(r == 1, "%s: %s", s->tag, err);
  } else {
    ok = ok && pc_test_run_compiled(g, opt, ins, got, s->tag);
  }
  int64_t n = ok ? pc_tensor_numel(&ref[0]) : 0;
  for (int64_t i = 0; i < n; i++) {
    double a = ((float *)got[0].data)[i], b = ((float *)ref[0].data)[i];
    if (!(isnan(a) && isnan(b)) && !(fabs(a - b) <= 2e-5 * (1 + fabs(b)))) {
      ok = CHECK_MSG(0, "%s (O%d%s%s): y[%lld] = %.9g, interpreter %.9g", s->tag, opt, unfused ? " unfused" : "",
                     emulated ? ", CUDA emulated" : "", (long long)i, a, b);
      break;
    }
  }
  for (int i = 0; i < g->n_inputs; i++) free(ins[i].data);
  pc_tensor_free(&ref[0]);
  free(got[0].data);
  pc_graph_free(g);
  return r < 0 ? -1 : ok;
}

static int check_shape(const shape *s, int opt, int unfused, int *fused) {
  return check_shape_on(s, opt, unfused, fused, 0);
}

static const shape shapes[] = {
    {"seq 1, head dim 1", 1, 1, 1, 1, 1, 1, 0, 0, 0, 0},
    {"one query, one key, d 2", 1, 1, 1, 1, 2, 2, 0, 0, 0, 0},
    {"one query, 3 keys, d 1", 1, 1, 1, 3, 1, 1, 0, 0, 0, 0},
    {"rank 3, 5 x 7 keys, d 3", 2, 3, 5, 7, 3, 5, 0, 0, 0, 1},
    {"encoder heads, seq 70, d 64, padding mask", 2, 2, 70, 70, 64, 64, 1, 1, 0, 0},
    {"d 80, 33 x 100, causal", 1, 2, 33, 100, 80, 80, 0, 0, 1, 0},
    {"causal + full mask, seq 65, 3 heads", 2, 3, 65, 65, 16, 24, 0, 2, 1, 0},
    {"one query over 130 keys, mask", 1, 4, 1, 130, 64, 64, 1, 1, 0, 0},
    {"causal, more queries than keys", 1, 1, 40, 20, 8, 8, 0, 0, 1, 0},
    {"seq 129, d 17 into dv 33", 1, 1, 129, 129, 17, 33, 0, 0, 0, 0},
    {"uniform constant mask", 1, 2, 6, 6, 4, 4, 0, 3, 0, 0},
};

PC_TEST(attention_fused_against_interpreter) {
  primc_attention_force_fuse(1); /* the edge shapes are mostly below the planner's query count */
  for (size_t i = 0; i < sizeof shapes / sizeof *shapes; i++) {
    int fused = 0;
    check_shape(&shapes[i], 2, 0, &fused);
    /* over one key, simplify drops the softmax's reductions (each is the element itself): no chain is left */
    CHECK_MSG(fused == (shapes[i].Sk > 1), "%s: %s", shapes[i].tag, fused ? "fused over one key" : "not fused into one attention call");
  }
  primc_attention_force_fuse(-1);
}

/* the CUDA attention kernels (a warp per query row, its lanes over the keys or, PRIMC_CUDA_ATTN=dims, over the
 * head dims) on the CPU emulator of rendered CUDA C against the interpreter: head dims above and below a warp's 32
 * lanes up to the largest, keys in several chunks of 32, padding and full masks, causal, rank 3 */
PC_TEST(attention_cuda_emulated) {
  static const shape cuda_shapes[] = {
      {"cuda: d 40 into dv 70, heads split, padding mask", 1, 2, 20, 24, 40, 70, 1, 1, 0, 0},
      {"cuda: causal + full mask", 1, 2, 17, 17, 16, 24, 0, 2, 1, 0},
      {"cuda: rank 3, 5 x 7 keys, d 3", 2, 3, 5, 7, 3, 5, 0, 0, 0, 1},
      {"cuda: uniform constant mask", 1, 2, 6, 6, 4, 4, 0, 3, 0, 0},
      {"cuda: 70 keys in 3 chunks, d 64, padding mask", 1, 2, 9, 70, 64, 64, 1, 1, 0, 0},
      {"cuda: causal + full mask, 65 keys", 1, 1, 65, 65, 8, 40, 0, 2, 1, 0},
      {"cuda: d 130, a warp a block", 1, 1, 3, 40, 130, 20, 0, 0, 0, 0},
      {"cuda: d 256, the largest key tile", 1, 1, 2, 5, 256, 8, 0, 0, 0, 0},
  };
  primc_attention_force_fuse(1);
  for (int dims = 0; dims < 2; dims++) { /* the lanes over the keys, then over the head dims */
    if (dims) setenv("PRIMC_CUDA_ATTN", "dims", 1);
    for (size_t i = 0; i < sizeof cuda_shapes / sizeof *cuda_shapes; i++) {
      int fused = 0;
      if (check_shape_on(&cuda_shapes[i], 2, 0, &fused, 1) < 0) {
        SKIP("no g++ for the CUDA emulator");
        dims = 2;
        break;
      }
      CHECK_MSG(fused, "%s: no attention call", cuda_shapes[i].tag);
    }
  }
  unsetenv("PRIMC_CUDA_ATTN");
  primc_attention_force_fuse(-1);
}

/* the planner: few queries stay on the stored-scores kernels (the call's 16-query vectors would be mostly
 * idle lanes), many take the call where the CPU has a vector row (the plain C row never pays; on AVX2 the call
 * pays from one query); both compute the same */
PC_TEST(attention_planner_query_count) {
  shape few_q = {"8 queries over 200 keys", 1, 2, 8, 200, 16, 16, 0, 0, 0, 0};
  shape many = {"seq 70", 1, 2, 70, 70, 16, 16, 0, 0, 0, 0};
  int row = primc_attention_row_active(), vec = row != PRIMC_ATTENTION_ROW_GENERIC, few = 0;
#if PRIMC_X86
  few = row == PRIMC_ATTENTION_ROW_AVX2; /* the AVX2 row pays from one query */
  CHECK(primc_attention_pays_for(PRIMC_ATTENTION_ROW_AVX2, 1, 512) && !primc_attention_pays_for(PRIMC_ATTENTION_ROW_AVX512, 8, 200));
#endif
  CHECK(primc_attention_pays(8, 200) == few && primc_attention_pays(70, 70) == vec);
  CHECK(!primc_attention_pays_for(PRIMC_ATTENTION_ROW_GENERIC, 512, 512));
#if PRIMC_X86
  CHECK(primc_attention_pays_for(PRIMC_ATTENTION_ROW_AVX2, 70, 70) && primc_attention_pays_for(PRIMC_ATTENTION_ROW_AVX512, 70, 70));
#endif
  int fused = !few;
  check_shape(&few_q, 2, 0, &fused);
  CHECK_MSG(fused == few, "8 queries: %s", fused ? "fused" : "not fused");
  check_shape(&many, 2, 0, &fused);
  CHECK_MSG(fused == vec, "70 queries: %s", fused ? "fused without a vector row" : "not fused");
}

PC_TEST(attention_off_at_O0_and_unfused) {
  primc_attention_force_fuse(1);
  int fused = 1;
  check_shape(&shapes[2], 0, 0, &fused);
  CHECK_MSG(!fused, "-O0 made an attention call");
  fused = 1;
  check_shape(&shapes[4], 2, 1, &fused);
  CHECK_MSG(!fused, "--unfused made an attention call");
  primc_attention_force_fuse(-1);
}

/* a second reader of the scores keeps the chain on today's kernels */
PC_TEST(attention_scores_read_twice_stay_apart) {
  shape s = {"scores read twice", 1, 2, 9, 9, 4, 4, 0, 0, 0, 0};
  primc_attention_force_fuse(1);
  pc_graph *g = build(&s);
  const pc_value *y = g->outputs[0], *p = y->producer->in[0];
  /* p = e / sum: output the sum of the scores too */
  pc_output_add(g, p->producer->in[0]);
  pc_pipeline_opts po = {.opt_level = 2};
  CHECK(pc_pipeline_run(g, &po) == PC_OK);
  char *text = pc_test_kernels_text(g);
  CHECK(text && !strstr(text, "primc_k_attention"));
  free(text);
  pc_graph_free(g);
  primc_attention_force_fuse(-1);
}

/* ---------------------------------------------------------------- the runtime's rows */

/* y = softmax(q k^T * scale + mask) v in double over [B0, B1] heads, operands at the params' strides */
static void reference(const int64_t *p, const float *Q, const float *K, const float *V, const float *M, double *y) {
  int64_t B0 = p[1], B1 = p[2], Sq = p[3], Sk = p[4], D = p[5], Dv = p[6];
  double scale;
  memcpy(&scale, &p[33], 8);
  double *s = malloc(sizeof *s * (size_t)Sk);
  for (int64_t b0 = 0; b0 < B0; b0++)
    for (int64_t b1 = 0; b1 < B1; b1++)
      for (int64_t m = 0; m < Sq; m++) {
        double mx = -INFINITY, sum = 0;
        for (int64_t n = 0; n < Sk; n++) {
          double a = 0;
          for (int64_t d = 0; d < D; d++)
            a += (double)Q[p[7] + b0 * p[8] + b1 * p[9] + m * p[10] + d * p[11]] *
                 K[p[12] + b0 * p[13] + b1 * p[14] + n * p[15] + d * p[16]];
          a *= scale;
          if (p[32] & 1) a += M[p[22] + b0 * p[23] + b1 * p[24] + m * p[25] + n * p[26]];
          if ((p[32] & 2) && n > m) a = -INFINITY;
          s[n] = a, mx = a > mx ? a : mx;
        }
        for (int64_t n = 0; n < Sk; n++) sum += s[n] = exp(s[n] - mx);
        for (int64_t c = 0; c < Dv; c++) {
          double a = 0;
          for (int64_t n = 0; n < Sk; n++) a += s[n] * V[p[17] + b0 * p[18] + b1 * p[19] + n * p[20] + c * p[21]];
          y[((b0 * B1 + b1) * Sq + m) * Dv + c] = a / sum;
        }
      }
  free(s);
}

/* Q, K, V stored [B0, S, B1, D] (heads inside rows), K read transposed, the mask [B0, 1, 1, Sk] broadcast;
 * mask 2: a full [B0, Sq, Sk] mask whose rows start with long runs of -inf (a row with nothing attendable
 * in its first key tiles, one with nothing at all); tr: Q, K, V and y stored d-major, [B0, B1, D, S] */
static void row_case(int row, int64_t B0, int64_t B1, int64_t Sq, int64_t Sk, int64_t D, int64_t Dv, int mask,
                     int causal, int tr) {
  int64_t nq = B0 * Sq * B1 * D, nk = B0 * Sk * B1 * D, nv = B0 * Sk * B1 * Dv, ny = B0 * B1 * Sq * Dv;
  int64_t nm = mask == 2 ? B0 * Sq * Sk : B0 * Sk;
  float *Q = malloc(sizeof *Q * (size_t)nq), *K = malloc(sizeof *K * (size_t)nk), *V = malloc(sizeof *V * (size_t)nv);
  float *M = malloc(sizeof *M * (size_t)nm), *Y = malloc(sizeof *Y * (size_t)ny);
  double *R = malloc(sizeof *R * (size_t)ny), scale = 1 / sqrt((double)D);
  for (int64_t i = 0; i < nq; i++) Q[i] = frand();
  for (int64_t i = 0; i < nk; i++) K[i] = frand();
  for (int64_t i = 0; i < nv; i++) V[i] = frand();
  if (mask == 2)
    for (int64_t i = 0; i < nm; i++) {
      int64_t m = i / Sk % Sq, n = i % Sk;
      M[i] = m % 5 == 4 || n < m * 7 % (Sk + 1) ? -INFINITY : frand(); /* every fifth row: nothing attendable */
    }
  else
    for (int64_t i = 0; i < nm; i++) M[i] = i % Sk > Sk / 2 && i % 3 == 0 ? -INFINITY : frand();
  int64_t p[PRIMC_ATTENTION_PARAMS] = {PRIMC_F32, B0, B1, Sq, Sk, D, Dv,
                                       0, Sq * B1 * D, D, B1 * D, 1,
                                       0, Sk * B1 * D, D, B1 * D, 1,
                                       0, Sk * B1 * Dv, Dv, B1 * Dv, 1,
                                       0, Sk, 0, 0, 1,
                                       0, B1 * Sq * Dv, Sq * Dv, Dv, 1,
                                       (mask ? 1 : 0) | (causal ? 2 : 0), 0};
  if (mask == 2) p[23] = Sq * Sk, p[25] = Sk;
  if (tr) { /* [B0, B1, D, S]: the row stride 1, the d stride S */
    int64_t S[4] = {Sq, Sk, Sk, Sq}, W[4] = {D, D, Dv, Dv}, at[4] = {7, 12, 17, 27};
    for (int o = 0; o < 4; o++) p[at[o] + 1] = S[o] * B1 * W[o], p[at[o] + 2] = S[o] * W[o], p[at[o] + 3] = 1, p[at[o] + 4] = S[o];
  }
  memcpy(&p[33], &scale, 8);
  void *bufs[5] = {Y, Q, K, V, M};
  int st = primc_attention_force_row(row) == 0 ? primc_k_attention(p, bufs) : -100;
  primc_attention_force_row(-1);
  reference(p, Q, K, V, M, R);
  int ok = CHECK_MSG(st == PRIMC_OK, "status %d", st);
  for (int64_t b = 0; ok && b < B0 * B1; b++)
    for (int64_t m = 0; ok && m < Sq; m++)
      for (int64_t c = 0; ok && c < Dv; c++) {
        int64_t i = (b * Sq + m) * Dv + c;
        float y = Y[p[27] + b / B1 * p[28] + b % B1 * p[29] + m * p[30] + c * p[31]];
        if (!(isnan(y) && isnan(R[i])) && !(fabs(y - R[i]) <= 1e-5 * (1 + fabs(R[i]))))
          ok = CHECK_MSG(0, "%s %lldx%lld heads, %lld x %lld, d %lld/%lld%s%s%s: y[%lld] = %.9g, reference %.9g",
                         primc_attention_row_name(row), (long long)B0, (long long)B1, (long long)Sq, (long long)Sk,
                         (long long)D, (long long)Dv, mask == 2 ? ", full mask" : mask ? ", mask" : "",
                         causal ? ", causal" : "", tr ? ", d-major" : "", (long long)i, y, R[i]);
      }
  free(Q), free(K), free(V), free(M), free(Y), free(R);
}

static void row_cases(int row) {
  static const int64_t c[][9] = {
      {1, 1, 1, 1, 1, 1, 0, 0, 0},       {2, 3, 31, 33, 64, 64, 1, 0, 0}, {1, 2, 64, 64, 80, 80, 0, 1, 0},
      {1, 1, 97, 200, 7, 40, 1, 1, 0},   {2, 1, 1, 257, 256, 256, 1, 0, 0}, {1, 1, 50, 30, 16, 16, 0, 1, 0},
      {2, 2, 70, 300, 24, 20, 2, 0, 0},  {1, 2, 45, 140, 19, 13, 2, 1, 1}, {2, 1, 33, 70, 64, 64, 1, 0, 1},
      /* every remainder of a register block's 6 (AVX2) or 8 (AVX-512) dv columns */
      {1, 3, 40, 90, 33, 33, 1, 1, 0},   {2, 1, 17, 50, 9, 11, 2, 0, 1},  {1, 1, 20, 20, 8, 15, 0, 0, 0},
  };
  for (size_t i = 0; i < sizeof c / sizeof *c; i++)
    row_case(row, c[i][0], c[i][1], c[i][2], c[i][3], c[i][4], c[i][5], (int)c[i][6], (int)c[i][7], (int)c[i][8]);
}

/* every row of runtime/attention_rows.def this CPU runs */
PC_TEST(attention_rows) {
  int ran = 0;
  for (int r = 0; r < PRIMC_ATTENTION_ROW_COUNT; r++) {
    if (primc_attention_force_row(r) != 0) {
      printf("  %s: not run on this CPU\n", primc_attention_row_name(r));
      continue;
    }
    primc_attention_force_row(-1);
    row_cases(r);
    ran++;
  }
  CHECK(ran >= 1 && primc_attention_force_row(PRIMC_ATTENTION_ROW_GENERIC) == 0);
  primc_attention_force_row(-1);
}
