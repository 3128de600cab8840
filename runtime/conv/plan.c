/* runtime/conv/plan.c: the conv planner: ranks the rows that fit by one per-CPU tuning table, once, when a call is compiled. */
#include "runtime/conv/conv.h"
#include "runtime/gemm/gemm.h"

#include <string.h>

/*
 * Every threshold and CPU-model branch that picks a conv row lives here; the rows' files say only what
 * they can run. The figures behind the values are in bench/conv_rows.md.
 */
typedef struct cv_tuning {
  const char *cpu;
  /* Winograd F(2x2, 3x3): its 16 multiply-adds per tile, where the GEMM does 36, beat the GEMM's better
   * use of the FMAs from this many input and output channels (fewer where zmm FMAs issue one per cycle)
   * and this many 2x2 tiles, of whose outputs at least wino_min_fill percent lie inside the map (an odd
   * side's last tiles compute outputs past it) */
  int64_t wino_min_ch, wino_min_tiles, wino_min_fill;
  /* and from wino_small_ch channels (0: never) where tiles x channels reach wino_small_work too */
  int64_t wino_small_ch, wino_small_work;
  /* and, for weights packed once, on maps of wino_few_tiles up to wino_min_tiles tiles where output pixels x
   * channels reach wino_few_work (0: never) */
  int64_t wino_few_tiles, wino_few_work;
  /* direct lanes: output channels a multiple of the 32 lanes, at least dl_min_c input channels; 1x1s only
   * onto rows of a whole tile of pixels, narrowing dl_1x1_narrow times or more, and not into
   * (dl_1x1_gap_lo, dl_1x1_gap_hi] channels, where the GEMM reads x in place as well */
  int64_t dl_nr, dl_min_c, dl_1x1_min_ow, dl_1x1_narrow, dl_1x1_gap_lo, dl_1x1_gap_hi;
  /* ... and other convs at stride 1 only when they widen the channels fewer than dl_max_widen times, or read
   * dl_widen_min_c input channels or more */
  int64_t dl_max_widen, dl_widen_min_c;
  /* the transposed GEMM (output channels in the lanes): when the share of used lanes over channels beats
   * the one over pixels by gt_lane_gain; and narrowing 1x1s into at most gt_1x1_max_og channels (a
   * multiple of the lanes) by gt_1x1_narrow times or more, on maps of at most gt_1x1_max_pix pixels
   * (0: any) */
  int64_t lanes, gt_1x1_max_og, gt_1x1_narrow, gt_1x1_max_pix;
  double gt_lane_gain;
  /* direct over phase images: at most 1 / direct_waste_den of a row on padding, at least direct_min_k taps x
   * channels (a 3-channel stem's phase copies cost more than generated im2col rows), at least direct_min_oh
   * output rows (1-D convs: their B rows read in place ran slower than packed im2col panels on a Xeon) */
  int64_t direct_waste_den, direct_min_k, direct_min_oh;
  /* 1-D windows of one channel: kernels of at least windows_min_kw taps (B^T packs by 16x16 transposes; the
   * 10-tap first conv of wav2vec ran 1.05x faster on 1 thread and 0.85x on 2 than generated im2col rows) */
  int64_t windows_min_kw;
  /* 1x1 convs of stride > 1 (ResNet's downsampling shortcuts) run as im2col GEMMs, whose column matrix is the
   * subsampled map, and not by the direct rows (1: so; on a Xeon the lanes ran them 1.3-1.7x and phase
   * images 1.2-1.4x slower, the strided pixel loads feeding each FMA) */
  int64_t strided_1x1_gemm;
  /* explicit im2col: rows narrower than im2col_max_ow, or few output channels over a column matrix in L2 */
  int64_t im2col_max_ow, im2col_direct_m, im2col_direct_bytes;
  /* depthwise in the lanes: 3x3/5x5 with a full vector of channels and a block per thread; other kernels
   * at stride 2 up to dwl_max_ow_s2 wide (dwl_max_ow_s2_c16 with 16+ channels) */
  int64_t dwl_min_c, dwl_max_ow_s2, dwl_max_ow_s2_c16;
  /* groups of up to 8 input and output channels with the output channels in ymm's lanes (1: so) */
  int64_t g8;
  /* depthwise with 8 channels in ymm's lanes: output rows of at most dw8_max_ow pixels; the row loop's long
   * vectors win over wider rows at stride 1 */
  int64_t dw8_max_ow;
  /* depthwise on the planes with 8 columns in ymm: output rows of at least dr8_min_ow pixels */
  int64_t dr8_min_ow;
  /* the fused pair: first convs of at most this many taps x input channels */
  int64_t pair_max_k;
  /* the bf16 row (when asked for): B (X_col) is made, rounded and packed per call, a cost per element of B
   * that only deep sums (taps x input channels) into enough output channels repay; fewer for a 1x1 stride-1
   * conv, whose B is x itself (ResNet-50 on an AMX Xeon, per conv: 2-6x faster on layers 2-4 and on
   * layer 1's 256 -> 64 1x1s, 1.3-2.2x slower on the stem, its 64-channel 3x3s and its 64 -> 256 1x1s) */
  int64_t bf16_min_k, bf16_min_og, bf16_min_og_1x1, bf16_min_c; /* bf16_min_c: input channels a group (0: any) */
  int bf16_few; /* a few channels (an image's) tap-major in bf16 from bf16_min_k whatever bf16_min_c says */
  /* 1x1s from bf16_min_k_1x1 where set; convs the AMX tiles run in place (bf16_direct.c: B tiles read x's channel
   * pairs where they lie) at every size where bf16_amx_few_k is set, a few channels' (an image's) from that K */
  int64_t bf16_min_k_1x1, bf16_amx_few_k;
  /* a batch's images as the columns of one GEMM: maps of at most batch_max_pix pixels into batch_min_og output
   * channels or more, the batch's pixels at most batch_max_cols (C, the sums, is that many columns in the
   * scratch). Zen 3, batch 8, 1 thread, the two alternated (build/conv_ab --batch 8): 512 -> 512 3x3 at 7x7
   * 0.77 of direct_lanes' time (packed weights), 0.79 of im2col_explicit's (plain, as a training step's);
   * 256 -> 512 3x3/2 onto 7x7 0.93; 128 -> 128 at 7x7 1.1-1.4 (too few multiply-adds per generated column);
   * 256 at 14x14 and 1x1s about even. Only the AVX2 row has measured it (0: never) */
  int64_t batch_max_pix, batch_min_og, batch_max_cols;
} cv_tuning;

#define CV_TUNING_COMMON                                                                                     \
  .dl_nr = 32, .dl_1x1_min_ow = 14, .dl_1x1_gap_lo = 96,                                 \
  .dl_1x1_gap_hi = 128, .gt_1x1_max_og = 96, .gt_1x1_narrow = 4, .gt_lane_gain = 0.2,                          \
  .direct_waste_den = 8, .windows_min_kw = 16, .im2col_max_ow = 24, .im2col_direct_m = 28,                     \
  .im2col_direct_bytes = 1 << 20, .dwl_min_c = 16, .dwl_max_ow_s2 = 32, .bf16_min_og_1x1 = 64,                   \
  .batch_max_cols = 1 << 14
#define CV_BF16_GEMM .bf16_min_k = 256, .bf16_min_og = 128 /* B made per call (the AMX Xeon's figures above) */

#define CV_NEVER INT64_MAX /* a threshold no conv reaches */

/* Intel's two-FMA cores (f32 rows alike with and without AMX), batch 1, 1 / 2 threads, Winograd's time over the
 * direct lanes' (build/conv_ab winograd_f2x3,direct_lanes on a Xeon of family 6 model 167): ResNet's 512 at 7x7
 * 0.79 / 0.83 (weights from memory: 0.82 / 0.87), 384 at 7x7 0.88 / 0.94, 256 at 8x8 0.80 / 0.88, at 9x9 0.90 /
 * 0.98, at 10x10 0.78 / 0.84, 160 at 10x10 0.89 / 0.84; losing: 256 at 7x7 0.99 / 1.10, 128 at 7x7 1.4 / 1.6,
 * 512 at 5x5 (9 tiles) 1.27 / 1.35 */
#define CV_WINO_FEW_INTEL .wino_few_tiles = 16, .wino_few_work = 160 * 100
/* and from 48 channels where tiles x channels reach 16,000 (the same Xeon, 1 / 2 threads: 64 at 56x56 0.91 / 0.92,
 * 48 at 56x56 0.67 / 0.70, 64 -> 128 at 56x56 0.82 / 0.76, 64 at 112x112 0.85 / 0.88, 96 at 28x28 0.76 / 0.78;
 * losing or even below: 64 at 28x28 0.84 / 1.10, 56 at 28x28 0.75 / 1.14, 48 at 28x28, 32 at 56x56 1.24 / 1.21,
 * 64 at 14x14 1.14 / 1.37) */
#define CV_WINO_SMALL_INTEL .wino_small_ch = 48, .wino_small_work = 16000

/* the first three indexed by primc_cpu_zmm_fmas() (zmm FMAs a core starts per cycle; 0: no AVX-512, and no
 * AVX2 either: plain C and NEON); then Intel's cores of two, without and with AMX, and AVX2 without AVX-512 */
static const cv_tuning tunings[6] = {
    {.cpu = "no AVX-512", CV_TUNING_COMMON, CV_BF16_GEMM, .wino_min_ch = 128, .wino_min_tiles = 36,
     .dwl_max_ow_s2_c16 = 32, .dl_min_c = 8, .dl_1x1_narrow = 4, .dl_max_widen = CV_NEVER, .direct_min_k = 32,
     .lanes = 16, .dw8_max_ow = INT64_MAX, .dr8_min_ow = CV_NEVER, .pair_max_k = 48},
    /* 512-bit ops as two 256-bit halves (Zen 4): Winograd from 64 channels; the lanes win wider
     * stride-2 depthwise rows, where the row loop is bound by its masked loads and permutes */
    {.cpu = "AVX-512, one zmm FMA per cycle", CV_TUNING_COMMON, CV_BF16_GEMM, .wino_min_ch = 64, .wino_min_tiles = 36,
     .dwl_max_ow_s2_c16 = 64, .dl_min_c = 8, .dl_1x1_narrow = 4, .dl_max_widen = CV_NEVER, .direct_min_k = 32,
     .lanes = 16, .dw8_max_ow = INT64_MAX, .dr8_min_ow = CV_NEVER, .pair_max_k = 48},
    /* Zen 5's f32 Winograd from 32 channels where tiles x channels reach 32 x 196 (build/conv_ab plan,winograd_f2x3
     * against direct_lanes: ResNet's 64 at 56x56 0.77 ms against 0.97, 64 at 28x28 0.20 / 0.24, SqueezeNet's 32 ->
     * 128 at 27x27 0.20 / 0.23, 96 at 28x28 0.36 / 0.52; losing on 32 at 20x20 0.040 / 0.032, 64 at 14x14 0.063 /
     * 0.057, 48 -> 192 at 13x13, 16 -> 64 at 55x55). 3-channel stems in the lanes: MobileNetV2's 3 -> 32 3x3/2
     * 0.14 ms against 0.19, ResNet's 7x7/2 1.05 against 1.08, SqueezeNet's 3 -> 64 3x3/2 0.28 against 0.29. Its
     * bf16 convs, x read in place (bf16_direct.c) from 32 channels at stride 1 and 2: ResNet-50's 3x3s 1.3-1.9x the
     * f32 rows' speed (64 at 56x56 0.51 ms against 0.96), its strided 3x3s and 1x1s 1.5-1.7x; the GEMM row's 1x1s
     * from 64 channels 1.2-1.8x; the 3-channel 7x7/2 stem in place as 4 channels 0.82 ms against 1.06 (its 3x3s,
     * K = 27, stay f32: 3 -> 32 3x3/2 at 224 0.16 against 0.14), build/conv_ab bf16_tiles,plan */
    {.cpu = "AVX-512, two zmm FMAs per cycle (AMD)", CV_TUNING_COMMON, .bf16_min_k = 64, .bf16_min_og = 64,
     .bf16_min_c = 16, .bf16_few = 1,
     .wino_min_ch = 128, .wino_min_tiles = 36, .wino_small_ch = 32, .wino_small_work = 32 * 196,
     .dwl_max_ow_s2_c16 = 32, .dl_min_c = 1, .dl_1x1_narrow = 4, .dl_max_widen = CV_NEVER, .direct_min_k = 32,
     .lanes = 16, .dw8_max_ow = INT64_MAX, .dr8_min_ow = CV_NEVER, .pair_max_k = 48},
    /* Sapphire/Emerald Rapids: no narrowing 1x1 is faster in the lanes than as a GEMM; onto maps of more than
     * 16x16 pixels the GEMM reading x in place beats the transposed one too (MobileNetV2's 192 -> 32 at 28x28 0.047
     * ms against 0.055 on 1 thread, 0.025 against 0.029 on 2; at 14x14 384 -> 64 0.049 against 0.047, 576 -> 96
     * 0.108 against 0.103); 3-channel stems run faster in the lanes than over phase images; strided 1x1s run
     * faster as GEMMs than in either direct row */
    {.cpu = "AVX-512, two zmm FMAs per cycle (Intel)", CV_TUNING_COMMON, CV_BF16_GEMM, .wino_min_ch = 128, .wino_min_tiles = 36,
     CV_WINO_FEW_INTEL, CV_WINO_SMALL_INTEL,
     .dwl_max_ow_s2_c16 = 32, .dl_min_c = 1, .dl_1x1_narrow = CV_NEVER, .gt_1x1_max_pix = 256, .direct_min_oh = 2,
     .strided_1x1_gemm = 1, .dl_max_widen = CV_NEVER, .direct_min_k = 32,
     .lanes = 16, .dw8_max_ow = INT64_MAX, .dr8_min_ow = CV_NEVER, .pair_max_k = 48},
    /* the same with AMX: bf16 convs over whole blocks of 32 channels at stride 1 and 2 with several taps run in
     * place on the tiles (bf16_direct.c), 3-4.5x the f32 rows' speed at every size measured (build/conv_ab
     * bf16_tiles,plan, 2 threads: 32 at 28x28 0.025 ms against 0.076, 64 at 56x56 0.15 against 0.55, 512 at 7x7
     * 0.15 against 0.67, 128 -> 128 3x3/2 from 56x56 0.25 against 0.56); 1x1s from 64 channels on the bf16 GEMM
     * 1.5-3.8x (64 -> 256 at 56x56 0.19 against 0.28, 1024 -> 256 at 14x14 0.077 against 0.29); 3x3s over other
     * channel counts as before (48 -> 192 at 28x28 0.16 against 0.31, but 8 -> 128 at 10x10 0.015 against 0.009);
     * image stems in place from K = 64 (the 7x7/2 0.38 against 0.62; 3x3/2 ones, K = 27, stay f32: 3 -> 64 0.23
     * against 0.19) */
    {.cpu = "AVX-512, two zmm FMAs per cycle (Intel) with AMX", CV_TUNING_COMMON, CV_BF16_GEMM, .bf16_min_k_1x1 = 64,
     .bf16_amx_few_k = 64, .wino_min_ch = 128, .wino_min_tiles = 36, CV_WINO_FEW_INTEL, CV_WINO_SMALL_INTEL,
     .dwl_max_ow_s2_c16 = 32, .dl_min_c = 1, .dl_1x1_narrow = CV_NEVER, .gt_1x1_max_pix = 256, .direct_min_oh = 2,
     .strided_1x1_gemm = 1, .dl_max_widen = CV_NEVER, .direct_min_k = 32,
     .lanes = 16, .dw8_max_ow = INT64_MAX, .dr8_min_ow = CV_NEVER, .pair_max_k = 48},
    /* AVX2 (Zen 3; the direct lanes row in ymm): 3-channel stems in the lanes (MobileNetV2's 3.8 -> 0.64 ms,
     * ResNet-18's 11.3 -> 3.4); no 1x1 in the lanes: the GEMM reading x in place, its store fused, runs them
     * 1.1-3x faster (16 -> 96 at 112x112 0.76 ms against 2.3, ResNet-50's 64 -> 256 at 56x56 1.5 against 3.7),
     * strided ones as im2col GEMMs (ResNet-50's shortcuts 3.0 ms against 5.7 in the lanes); stride-1 convs that
     * widen the channels 2x or more from fewer than 16 (the lanes' 6-pixel tile), or onto fewer than the lanes'
     * 32, over phase images where padding is at most 1/8 of a row on maps of 8 rows or more (textdet's 64 -> 16
     * 3x3s 0.55-0.75x the im2col rows' time; 1-D convs 1.25x slower), else as im2col GEMMs (bench/conv_rows.md,
     * build/conv_ab); widening ones from 16+ channels in the lanes' 3-pixel tile (SqueezeNet's expand 3x3s 0.84-0.94x
     * the phase and im2col rows' time); the
     * transposed GEMM only on maps of 7x7 and below; ymm's 8 lanes; depthwise in the lanes up to output rows of
     * 112 (once its 8x8 transposes stayed in registers, 0.35-0.95x dw_rows8's time on MobileNet's and
     * EfficientNet's maps, 3x3 and 5x5, stride 1 and 2; about even at 112-224 wide, stride 1), on the planes past;
     * a first conv of up to 32 taps x input channels fused with the depthwise conv after it (a broadcast per FMA
     * on 8 lanes: pair / the two rows, 1 and 2 threads: 16 -> 96 1x1 at 112x112 then 3x3/2 0.68 / 0.46, 24 ->
     * 144 at 56x56 0.92 / 0.61, 32 -> 192 at 28x28 0.86-0.92 / 0.63-0.73, 40 -> 240 0.96 / 1.01, 48 -> 288 1.00 /
     * 1.04; the 3 -> 32 3x3/2 stem then 3x3 0.89 / 0.74; bench/conv_rows.md); Winograd from 16 tiles on maps of
     * even sides or nearly (the text detector's 512 -> 512 3x3s at 10x14 0.65-0.79 of the lanes' time, 256 at
     * 8x8 0.60, at 10x10 0.76; 512 at 7x7, a quarter of its tiles' outputs past the map, 0.8-1.1) */
    {.cpu = "AVX2", CV_TUNING_COMMON, CV_BF16_GEMM, .wino_min_ch = 128, .wino_min_tiles = 16, .wino_min_fill = 80,
     .dwl_max_ow_s2_c16 = 32, .dl_min_c = 1, .dl_1x1_narrow = CV_NEVER, .dl_max_widen = 2,
     .dl_widen_min_c = CV_DL_TILE3_MIN_C, .direct_min_k = 32, .direct_min_oh = 8, .strided_1x1_gemm = 1, .lanes = 8,
     .gt_1x1_max_pix = 64, .dw8_max_ow = 112, .g8 = 1, .dr8_min_ow = 113, .pair_max_k = 32, .batch_max_pix = 64,
     .batch_min_og = 256},
};

static const cv_tuning *tuning(void) {
  int z = primc_cpu_zmm_fmas();
  if (z == 2 && primc_gm_amd_family() == 0) return &tunings[primc_bgemm_row_active() == PRIMC_BGEMM_ROW_AMX ? 4 : 3];
  if (z <= 0 && primc_sgemm_isa() == PRIMC_ISA_AVX2) return &tunings[5];
  return &tunings[z >= 0 && z <= 2 ? z : 0];
}

const char *primc_conv_tuning_name(void) { return tuning()->cpu; }

/* what the ranking of one conv reads */
typedef struct cv_shape {
  const primc_conv2d *p;
  int64_t oh, ow, threads;
  const cv_tuning *t;
  int batch_tiles, weights_once; /* primc_conv_plan_opts' */
} cv_shape;

/* ---------------------------------------------------------------- what pays, per row */

static int64_t cg_of(const primc_conv2d *p) { return p->c / p->groups; }

/* a 1x1 conv of stride > 1 the tuning runs as an im2col GEMM, not by a direct row */
static int strided_1x1_as_gemm(const cv_shape *s) {
  const primc_conv2d *p = s->p;
  return s->t->strided_1x1_gemm && p->kh == 1 && p->kw == 1 && (p->stride_h > 1 || p->stride_w > 1);
}

static int never(const cv_shape *s) { return 0; }
static int always(const cv_shape *s) { return 1; }

/* a plan's tile word: STRIPS and WINOGRAD weights' tile height; for BF16 ones whether every call streams them */
static int32_t tile_word(int layout, const primc_conv_plan_opts *o) {
  if (layout == PRIMC_CONV_W_STRIPS || layout == PRIMC_CONV_W_WINOGRAD) return o->tile_mr;
  return layout == PRIMC_CONV_W_BF16 && o->weights_stream ? PRIMC_CONV_BF16_STREAM : 0;
}

static int bf16_pays(const cv_shape *s) {
  const primc_conv2d *p = s->p;
  int64_t og = p->o / p->groups;
  int few_ch = primc_cv_bf16_few(p), few = s->t->bf16_few && few_ch;
  int64_t k = cg_of(p) * p->kh * p->kw;
  if (s->t->bf16_amx_few_k && primc_cv_bf16_taps_major(p) && (!few_ch || k >= s->t->bf16_amx_few_k)) return 1;
  int pw = cv_is_pointwise(p);
  return k >= (pw && s->t->bf16_min_k_1x1 ? s->t->bf16_min_k_1x1 : s->t->bf16_min_k) &&
         (cg_of(p) >= s->t->bf16_min_c || few) && og >= (pw ? s->t->bf16_min_og_1x1 : s->t->bf16_min_og);
}

/* images as GEMM columns: a batch of small maps into many output channels, not 1x1s (their GEMM reads x in
 * place, its store fused, and ran as fast per image) */
static int batch_pays(const cv_shape *s) {
  const primc_conv2d *p = s->p;
  int64_t P = s->oh * s->ow;
  return p->n > 1 && p->kh * p->kw > 1 && P <= s->t->batch_max_pix && p->o / p->groups >= s->t->batch_min_og &&
         p->n * P <= s->t->batch_max_cols;
}

/* A batch's small maps go to the GEMMs several images a round: ResNet's 512-channel 3x3s at 7x7 (16 tiles an image)
 * take 5.8 ms on Winograd at batch 8 against 7.4 in the direct lanes (build/conv_ab --batch 8, 1 thread; 3.5 / 3.8
 * on 2 with the weights from memory). Not where the batch varies at run time (the plan at its bound would run batch
 * 1 so). Weights packed at every call too (a training step's) where Winograd's packing runs on zmm (512 x 512
 * 3.05 -> 1.42 ms): ResNet-18's b8 step's layer-4 convs 14.0-15.9 -> 11.2-12.9 ms each, forward and input
 * gradient (the AMX Xeon, 1 thread; 8.8 against 8.1 when that packing was scalar). */
static int wino_pays(const cv_shape *s) {
  const primc_conv2d *p = s->p;
  int64_t ch = s->t->wino_min_ch, tiles = ((s->oh + 1) / 2) * ((s->ow + 1) / 2);
  if (s->batch_tiles && (s->weights_once || cv_use_avx512())) tiles = primc_cv_wino_round_tiles(p, s->oh, s->ow);
  int64_t least = p->c < p->o ? p->c : p->o;
  int wide = s->t->wino_small_ch && least >= s->t->wino_small_ch && tiles * least >= s->t->wino_small_work;
  int few = s->t->wino_few_work && s->weights_once && tiles >= s->t->wino_few_tiles &&
            tiles < s->t->wino_min_tiles && s->oh * s->ow * least >= s->t->wino_few_work;
  return (((least >= ch || wide) && tiles >= s->t->wino_min_tiles) || few) &&
         100 * s->oh * s->ow >= s->t->wino_min_fill * 4 * tiles;
}

/* not a stem of few channels (its rows of few taps send the sums through memory more often than the GEMM),
 * nor 1x1s onto rows shorter than a tile or that do not narrow enough, nor stride-1 convs that widen too much
 * from few channels */
static int dl_pays(const cv_shape *s) {
  const primc_conv2d *p = s->p;
  const cv_tuning *t = s->t;
  if ((p->kh * p->kw == 1 && s->ow < t->dl_1x1_min_ow) || strided_1x1_as_gemm(s)) return 0;
  if (cv_is_pointwise(p)) {
    int narrows = p->c / t->dl_1x1_narrow >= p->o && !(p->o > t->dl_1x1_gap_lo && p->o <= t->dl_1x1_gap_hi);
    if (!narrows) return 0;
  } else if (p->stride_h == 1 && p->stride_w == 1 && p->o / p->c >= t->dl_max_widen && p->c < t->dl_widen_min_c) {
    return 0;
  }
  return p->o % t->dl_nr == 0 && p->c >= t->dl_min_c;
}

static int direct_pays(const cv_shape *s) {
  const primc_conv2d *p = s->p;
  if (!primc_cv_direct_can(p) || cg_of(p) * p->kh * p->kw < s->t->direct_min_k || s->oh < s->t->direct_min_oh ||
      strided_1x1_as_gemm(s))
    return 0;
  int64_t wph = primc_cv_direct_wph(p, s->ow);
  return (wph - s->ow) * s->t->direct_waste_den <= wph;
}

static int windows_pays(const cv_shape *s) { return s->p->kw >= s->t->windows_min_kw; }

/* the share of the vector lanes that hold real columns when n columns are cut into vectors */
static double lane_use(int64_t n, int64_t lanes) { return (double)n / (double)(lanes * ((n + lanes - 1) / lanes)); }

/* A 1x1 narrowing many channels into few packs its whole input for few multiply-adds per element as a
 * GEMM over og weight rows, in strips that fit og poorly; with the channels in the lanes it reads the
 * input in place. Otherwise: when the channels fill the lanes better than the pixels do. */
static int gemm_t_pays(const cv_shape *s) {
  const primc_conv2d *p = s->p;
  const cv_tuning *t = s->t;
  int64_t og = p->o / p->groups, wph = primc_cv_direct_wph(p, s->ow), L = t->lanes;
  double pix = direct_pays(s) ? lane_use(s->oh * wph, L) * (double)s->ow / (double)wph : lane_use(s->oh * s->ow, L);
  if (cv_is_pointwise(p) && p->groups == 1 && og % L == 0 && og <= t->gt_1x1_max_og && p->c >= t->gt_1x1_narrow * og &&
      (!t->gt_1x1_max_pix || s->oh * s->ow <= t->gt_1x1_max_pix))
    return 1;
  return lane_use(og, L) >= pix + t->gt_lane_gain;
}

/* below this output width the rows the GEMM asks for are too short for generated im2col rows */
static int explicit_pays(const cv_shape *s) {
  const primc_conv2d *p = s->p;
  const cv_tuning *t = s->t;
  int64_t og = p->o / p->groups, kk = cg_of(p) * p->kh * p->kw, P = s->oh * s->ow;
  return s->ow < t->im2col_max_ow ||
         (og <= t->im2col_direct_m && kk * P * (int64_t)sizeof(float) <= t->im2col_direct_bytes);
}

/* The band loading each tile column once beats the row loop at any width given a full vector of
 * channels and a block per thread, except 3x3/1 on planes under 8 wide, which the flat row runs better;
 * other kernels only at stride 2 and narrow rows. */
static int dwl_pays(const cv_shape *s) {
  const primc_conv2d *p = s->p;
  const cv_tuning *t = s->t;
  int wide = s->ow >= 8 || p->stride_w == 2 || p->kw == 5;
  int64_t items = p->n * ((p->c + 15) / 16);
  if (primc_cv_dwl_cols_ok(p) && wide && p->c >= t->dwl_min_c && items >= s->threads) return 1;
  int64_t max_ow = p->c >= t->dwl_min_c ? t->dwl_max_ow_s2_c16 : t->dwl_max_ow_s2;
  return p->stride_w == 2 && s->ow <= max_ow;
}

/* RegNet-Y 400MF's groups of 8 channels on Zen 3, per conv: 0.31-0.41x the time of the GEMM rows the planner
 * took before (direct_phase, im2col_explicit), 112x112 at stride 2 2.05 -> 0.64 ms, 7x7 0.28 -> 0.10 */
static int g8_pays(const cv_shape *s) { return s->t->g8 != 0; }

/* Zen 3, the epilogue in the lanes, the two rows alternated in one process: 0.15-0.4x dw_plane's time on output
 * rows of 7 to 28 pixels, 0.2-0.6x on 56, 0.5-0.8x on 112 (3x3 and 5x5, stride 1 and 2), 1.2x on 224 */
static int dw8_pays(const cv_shape *s) { return s->ow <= s->t->dw8_max_ow; }

static int dr8_pays(const cv_shape *s) { return s->ow >= s->t->dr8_min_ow; }

/* the rank: within a class the first row that fits and pays; a row that never pays is only a fallback or
 * taken by force */
static const struct {
  int row;
  int (*pays)(const cv_shape *s);
} rank[] = {
    {PRIMC_CONV_ROW_BF16, bf16_pays}, /* only where the options ask for bf16 (CV_NEED_BF16) */
    {PRIMC_CONV_ROW_BATCH, batch_pays},
    {PRIMC_CONV_ROW_WINOGRAD, wino_pays},        {PRIMC_CONV_ROW_DIRECT_LANES, dl_pays},
    {PRIMC_CONV_ROW_GROUP_LANES8, g8_pays},      {PRIMC_CONV_ROW_GEMM_T, gemm_t_pays},
    {PRIMC_CONV_ROW_GEMM_1X1, always},           {PRIMC_CONV_ROW_WINDOWS, windows_pays},
    {PRIMC_CONV_ROW_DIRECT_PHASE, direct_pays},  {PRIMC_CONV_ROW_IM2COL_EXPLICIT, explicit_pays},
    {PRIMC_CONV_ROW_IM2COL_IMPLICIT, always},    {PRIMC_CONV_ROW_LANES_LOOP, never},
    {PRIMC_CONV_ROW_DW_LANES, dwl_pays},         {PRIMC_CONV_ROW_DW_FLAT, always},
    {PRIMC_CONV_ROW_DW_ROWS, always},            {PRIMC_CONV_ROW_DW_ROWS8, dr8_pays},
    {PRIMC_CONV_ROW_DW_LANES8, dw8_pays},
    {PRIMC_CONV_ROW_DW_PLANE, always},
    {PRIMC_CONV_ROW_PAIR_DW, never}, /* planned by primc_conv_plan_pair */
};
_Static_assert(sizeof rank / sizeof rank[0] == PRIMC_CONV_ROW_COUNT, "every conv row needs its place in plan.c's rank");

/* ---------------------------------------------------------------- the planner */

/* the layout a row's weights take under o: its own when packable, else o's when the row reads that */
static int row_layout(int row, const primc_conv_plan_opts *o) {
  int l = primc_cv_rows[row].layout;
  if (o->packable) return l == PRIMC_CONV_W_STRIPS && o->tile_mr <= 0 ? PRIMC_CONV_W_PLAIN : l;
  if (l == o->layout || (l == PRIMC_CONV_W_STRIPS && o->layout == PRIMC_CONV_W_PLAIN)) return o->layout;
  if (l == PRIMC_CONV_W_PLAIN && o->layout == PRIMC_CONV_W_PLAIN) return l;
  return -1;
}

/* whether row can run p under o here: its class, weights, ISA, scratch and fit */
static int row_can(int row, const primc_conv2d *p, const primc_conv_plan_opts *o, int *layout) {
  const cv_row *r = &primc_cv_rows[row];
  int cls = cv_is_depthwise(p) ? PRIMC_CONV_CLASS_DEPTHWISE : PRIMC_CONV_CLASS_CONV2D;
  if (r->cls != cls || !primc_isa_covers(primc_sgemm_isa(), r->isa) || ((r->needs & CV_NEED_COL) && !o->has_scratch) ||
      ((r->needs & CV_NEED_BF16) && !o->bf16))
    return 0;
  int l = row_layout(row, o);
  if (l < 0 || (l == PRIMC_CONV_W_WINOGRAD && o->tile_mr <= 0)) return 0;
  primc_conv2d q = *p;
  primc_conv2d_set_layout(&q, l, tile_word(l, o));
  *layout = l;
  return r->fits(&q, NULL);
}

int primc_conv_plan_make(const primc_conv2d *p, const primc_conv_plan_opts *o, primc_conv_plan *plan) {
  primc_conv_plan_opts plain = {.layout = PRIMC_CONV_W_PLAIN};
  if (!o) o = &plain;
  if (!p || !plan || !primc_cv_valid(p)) return PRIMC_ERR_ARG;
  cv_shape s = {p, 0, 0, o->threads > 0 ? o->threads : primc_threads_wanted(), tuning(), o->batch_tiles,
                o->weights_once};
  primc_conv2d_out_hw(p, &s.oh, &s.ow);
  int best = -1, layout = 0, first = -1, first_layout = 0, l;
  int forced = o->force ? primc_conv_row_find(o->force) : -1;
  if (forced >= 0 && row_can(forced, p, o, &l)) best = forced, layout = l;
  for (size_t i = 0; best < 0 && i < sizeof rank / sizeof rank[0]; i++) {
    if (!row_can(rank[i].row, p, o, &l)) continue;
    if (first < 0) first = rank[i].row, first_layout = l;
    if (rank[i].pays(&s)) best = rank[i].row, layout = l;
  }
  /* weights already in a layout no paying row reads: the first row that reads them */
  if (best < 0) best = first, layout = first_layout;
  if (best < 0) return PRIMC_ERR_ARG;
  plan->row = best;
  plan->layout = layout;
  plan->tile_mr = tile_word(layout, o);
  return PRIMC_OK;
}

/* every row that can run p under o here and may pay (the rank's order; rows that never pay are fallbacks
 * or forced only: lanes_loop is AVX-512's row run without it, 10-50x slower, and the PAIR row is
 * primc_conv_plan_pair's to decide), as plans; the autotuner times them. The count (it may exceed max:
 * only max are written), or -1 when p is inconsistent */
int primc_conv_plan_candidates(const primc_conv2d *p, const primc_conv_plan_opts *o, primc_conv_plan *out, int max) {
  primc_conv_plan_opts plain = {.layout = PRIMC_CONV_W_PLAIN};
  if (!o) o = &plain;
  if (!p || !primc_cv_valid(p)) return -1;
  int n = 0, l;
  for (size_t i = 0; i < sizeof rank / sizeof rank[0]; i++) {
    if (rank[i].pays == never || !row_can(rank[i].row, p, o, &l)) continue;
    if (out && n < max)
      out[n] = (primc_conv_plan){rank[i].row, l, tile_word(l, o)};
    n++;
  }
  return n;
}

/* Each pixel's 16 sums take a broadcast per multiply-add where the GEMM's tile takes one per two: past a
 * few dozen input channels x taps the unfused pair is faster. */
int primc_conv_plan_pair(const primc_conv2d *pw, const primc_conv2d *dw) {
  const cv_row *r = &primc_cv_rows[PRIMC_CONV_ROW_PAIR_DW];
  return pw && dw && primc_isa_covers(primc_sgemm_isa(), r->isa) && r->fits(pw, dw) &&
         pw->c * pw->kh * pw->kw <= tuning()->pair_max_k;
}

int primc_conv2d_then_dw_pays(const primc_conv2d *pw, const primc_conv2d *dw) { return primc_conv_plan_pair(pw, dw); }
