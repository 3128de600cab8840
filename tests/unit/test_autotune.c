/* tests/unit/test_autotune.c: --autotune: the planner's candidate rows, a timed choice that runs right, the cache's round trip and its corrupt or stale files. */
#include "codegen/autotune.h"
#include "include/primc.h"
#include "runtime/primc_rt.h"
#include "tests/test.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* the shapes tried: a 3x3 (many rows fit: Winograd-sized aside), a strided 1x1, a depthwise 3x3 */
static const primc_conv2d shapes[] = {
    {.n = 1, .c = 16, .h = 12, .w = 12, .o = 32, .kh = 3, .kw = 3, .groups = 1, .stride_h = 1, .stride_w = 1,
     .dil_h = 1, .dil_w = 1, .pad_t = 1, .pad_l = 1, .pad_b = 1, .pad_r = 1},
    {.n = 1, .c = 24, .h = 10, .w = 10, .o = 16, .kh = 1, .kw = 1, .groups = 1, .stride_h = 2, .stride_w = 2,
     .dil_h = 1, .dil_w = 1},
    {.n = 1, .c = 16, .h = 9, .w = 9, .o = 16, .kh = 3, .kw = 3, .groups = 16, .stride_h = 1, .stride_w = 1,
     .dil_h = 1, .dil_w = 1, .pad_t = 1, .pad_l = 1, .pad_b = 1, .pad_r = 1},
};
#define N_SHAPES (int)(sizeof shapes / sizeof shapes[0])

static primc_conv_plan_opts packable(void) {
  return (primc_conv_plan_opts){.packable = 1, .tile_mr = primc_sgemm_mr(), .has_scratch = 1};
}

static float frand(uint64_t *s) {
  *s = *s * 6364136223846793005ull + 1442695040888963407ull;
  return (float)((*s >> 40) & 0xFFFFFF) / (float)0x800000 - 1.0f;
}

/* a temporary cache path, removed by the caller */
static void temp_path(char *out, size_t n, const char *tag) {
  snprintf(out, n, "/tmp/primc_autotune_%s_%ld.txt", tag, (long)getpid());
  unlink(out);
}

static char *slurp(const char *path) {
  FILE *f = fopen(path, "r");
  if (!f) return NULL;
  char *b = calloc(1, 1 << 16);
  if (b) b[fread(b, 1, (1 << 16) - 1, f)] = 0;
  fclose(f);
  return b;
}

PC_TEST(autotune_candidates_include_the_planners_row) {
  for (int s = 0; s < N_SHAPES; s++) {
    primc_conv_plan_opts o = packable();
    primc_conv_plan heur, cand[16];
    CHECK_INT(primc_conv_plan_make(&shapes[s], &o, &heur), PRIMC_OK);
    int n = primc_conv_plan_candidates(&shapes[s], &o, cand, 16), found = 0;
    CHECK_MSG(n >= 1 && n <= 16, "shape %d: %d candidates", s, n);
    for (int i = 0; i < n && i < 16; i++) {
      found |= cand[i].row == heur.row && cand[i].layout == heur.layout && cand[i].tile_mr == heur.tile_mr;
      CHECK(primc_conv_row_class(cand[i].row) != PRIMC_CONV_CLASS_PAIR);
    }
    CHECK_MSG(found, "shape %d: the planner's row %s is a candidate", s, primc_conv_row_name(heur.row));
    CHECK_INT(primc_conv_plan_candidates(&shapes[s], &o, NULL, 0), n);
  }
  primc_conv2d bad = shapes[0];
  bad.groups = 5; /* 16 channels do not split in 5 */
  CHECK_INT(primc_conv_plan_candidates(&bad, NULL, NULL, 0), -1);
}

/* the timed row runs the conv as the definition says */
PC_TEST(autotune_choice_fits_and_matches_the_reference) {
  pc_autotune *t = pc_autotune_new(""); /* no cache file */
  CHECK(t && !pc_autotune_warning(t));
  if (!t) return;
  pc_autotune_set_budget(t, 0.005);
  uint64_t rng = 42;
  for (int s = 0; s < N_SHAPES; s++) {
    const primc_conv2d *p = &shapes[s];
    primc_conv_plan_opts o = packable();
    primc_conv_plan plan, cand[16];
    CHECK_INT(pc_autotune_plan(t, p, &o, &plan), PRIMC_OK);
    int n = primc_conv_plan_candidates(p, &o, cand, 16), in = 0;
    for (int i = 0; i < n && i < 16; i++) in |= cand[i].row == plan.row && cand[i].layout == plan.layout;
    CHECK_MSG(in, "shape %d: row %s is one of the candidates", s, primc_conv_row_name(plan.row));
    int64_t oh, ow, cg = p->c / p->groups, og = p->o / p->groups;
    primc_conv2d_out_hw(p, &oh, &ow);
    int64_t nx = p->n * p->c * p->h * p->w, nw = p->o * cg * p->kh * p->kw, ny = p->n * p->o * oh * ow;
    float *x = malloc(sizeof(float) * (size_t)nx), *w = malloc(sizeof(float) * (size_t)nw);
    float *y = malloc(sizeof(float) * (size_t)ny), *col = malloc(sizeof(float) * (size_t)(primc_conv_plan_scratch_floats(p, &plan) + 1));
    void *pw = NULL;
    CHECK(!posix_memalign(&pw, 64, primc_conv_plan_weight_bytes(p, &plan) + 64));
    for (int64_t i = 0; i < nx; i++) x[i] = frand(&rng);
    for (int64_t i = 0; i < nw; i++) w[i] = frand(&rng);
    CHECK_INT(primc_conv_plan_pack(p, &plan, w, pw), PRIMC_OK);
    primc_conv_epi e = {.lo = -INFINITY, .hi = INFINITY};
    CHECK_INT(primc_conv_run(p, &plan, x, pw, &e, y, NULL, col), PRIMC_OK);
    double worst = 0;
    for (int64_t o = 0; o < p->o; o++)
      for (int64_t i = 0; i < oh; i++)
        for (int64_t j = 0; j < ow; j++) {
          double acc = 0;
          for (int64_t c = 0; c < cg; c++)
            for (int64_t a = 0; a < p->kh; a++)
              for (int64_t b = 0; b < p->kw; b++) {
                int64_t ih = i * p->stride_h - p->pad_t + a * p->dil_h, iw = j * p->stride_w - p->pad_l + b * p->dil_w;
                if (ih < 0 || ih >= p->h || iw < 0 || iw >= p->w) continue;
                acc += (double)x[((o / og) * cg + c) * p->h * p->w + ih * p->w + iw] * w[((o * cg + c) * p->kh + a) * p->kw + b];
              }
          double d = fabs(acc - y[(o * oh + i) * ow + j]);
          if (d > worst) worst = d;
        }
    CHECK_MSG(worst < 1e-3, "shape %d, row %s: max error %g", s, primc_conv_row_name(plan.row), worst);
    free(x), free(w), free(y), free(col), free(pw);
  }
  pc_autotune_stats st;
  pc_autotune_stats_get(t, &st);
  CHECK(st.cached == 0 && st.timed == st.shapes);
  pc_autotune_free(t);
}

/* the second context reads every choice from the file the first wrote: nothing timed */
PC_TEST(autotune_cache_round_trip) {
  char path[256];
  temp_path(path, sizeof path, "rt");
  pc_autotune *a = pc_autotune_new(path);
  CHECK(a && !pc_autotune_warning(a)); /* a missing file is no warning */
  if (!a) return;
  pc_autotune_set_budget(a, 0.002);
  primc_conv_plan pa[N_SHAPES], pb[N_SHAPES];
  primc_conv_plan_opts o = packable();
  for (int s = 0; s < N_SHAPES; s++) CHECK_INT(pc_autotune_plan(a, &shapes[s], &o, &pa[s]), PRIMC_OK);
  pc_autotune_stats sa, sb;
  pc_autotune_stats_get(a, &sa);
  CHECK_INT(pc_autotune_save(a), 0);
  pc_autotune_free(a);
  pc_autotune *b = pc_autotune_new(path);
  CHECK(b && !pc_autotune_warning(b));
  if (!b) return;
  for (int s = 0; s < N_SHAPES; s++) {
    CHECK_INT(pc_autotune_plan(b, &shapes[s], &o, &pb[s]), PRIMC_OK);
    CHECK_INT(pb[s].row, pa[s].row);
    CHECK_INT(pb[s].layout, pa[s].layout);
  }
  pc_autotune_stats_get(b, &sb);
  CHECK_INT(sb.timed, 0);
  CHECK_INT(sb.cached, sa.timed);
  CHECK_INT(sb.shapes, sa.shapes);
  CHECK_INT(pc_autotune_save(b), 0); /* nothing new: the file stays as it is */
  pc_autotune_free(b);
  char *text = slurp(path);
  CHECK_CONTAINS(text, "# primc autotune cache 1");
  free(text);
  unlink(path);
}

/* a file that is not a cache is ignored with a warning, and rewritten; lines of other CPUs are kept, and
 * a row this build does not have is timed again */
PC_TEST(autotune_corrupt_or_stale_cache) {
  char path[256];
  temp_path(path, sizeof path, "bad");
  FILE *f = fopen(path, "w");
  CHECK(f);
  if (!f) return;
  fputs("\x01\x02 not a cache\n\t\t\t\n", f);
  fclose(f);
  primc_conv_plan_opts o = packable();
  primc_conv_plan plan;
  pc_autotune *t = pc_autotune_new(path);
  CHECK(t && pc_autotune_warning(t));
  if (!t) return;
  CHECK_CONTAINS(pc_autotune_warning(t), "ignored");
  pc_autotune_set_budget(t, 0.002);
  CHECK_INT(pc_autotune_plan(t, &shapes[0], &o, &plan), PRIMC_OK);
  CHECK_INT(pc_autotune_save(t), 0);
  pc_autotune_free(t);

  /* the rewritten file, with its row renamed to one that does not exist and another CPU's line added */
  char *text = slurp(path), *tab = text ? strrchr(text, '\t') : NULL;
  CHECK(tab != NULL);
  if (!tab) return free(text);
  *tab = 0;
  f = fopen(path, "w");
  fprintf(f, "%s\tno_such_row\nSome Other CPU isa 9\tn1 c1 h1 w1|t1\tim2col_implicit\n", text);
  fclose(f);
  free(text);
  t = pc_autotune_new(path);
  CHECK(t && !pc_autotune_warning(t));
  if (!t) return;
  pc_autotune_set_budget(t, 0.002);
  CHECK_INT(pc_autotune_plan(t, &shapes[0], &o, &plan), PRIMC_OK);
  pc_autotune_stats st;
  pc_autotune_stats_get(t, &st);
  CHECK_INT(st.timed, 1);
  CHECK_INT(pc_autotune_save(t), 0);
  pc_autotune_free(t);
  text = slurp(path);
  CHECK_CONTAINS(text, "Some Other CPU isa 9\tn1 c1 h1 w1|t1\tim2col_implicit");
  CHECK(text && !strstr(text, "no_such_row"));
  free(text);

  /* a directory in the cache's place cannot be read: a warning, and planning still works */
  t = pc_autotune_new("/");
  CHECK(t && pc_autotune_warning(t));
  if (t) CHECK_INT(pc_autotune_plan(t, &shapes[1], &o, &plan), PRIMC_OK);
  pc_autotune_free(t);
  unlink(path);
}

/* the C API's switch: a compile with it writes the cache it names */
PC_TEST(autotune_api_writes_the_cache) {
  char cache[256], model[4096], out[256];
  temp_path(cache, sizeof cache, "api");
  snprintf(model, sizeof model, "%s/models/resnet_tiny/model.onnx", pc_test_srcdir());
  snprintf(out, sizeof out, "/tmp/primc_autotune_api_%ld.ll", (long)getpid());
  primc_model *m = primc_model_new();
  CHECK_INT(primc_model_set_autotune(m, 1), PRIMC_STATUS_OK);
  CHECK_INT(primc_model_set_autotune_cache(m, cache), PRIMC_STATUS_OK);
  CHECK_INT(primc_model_load_file(m, model), PRIMC_STATUS_OK);
  if (!CHECK_INT(primc_model_compile(m, PRIMC_EMIT_LLVM, out), PRIMC_STATUS_OK)) printf("  %s\n", primc_model_error(m));
  primc_model_free(m);
  char *text = slurp(cache);
  CHECK_CONTAINS(text, "# primc autotune cache 1");
  CHECK(text && strchr(text, '\t'));
  free(text);
  unlink(cache);
  unlink(out);
}
