/* ir/types.c: the dtype and prim tables, type helpers and half-precision and 8-bit float conversions. */
#include "ir/ir.h"

#include <math.h>
#include <string.h>

typedef struct dtype_row {
  const char *name;
  size_t size;
  char cls; /* F I U B C */
} dtype_row;

static const dtype_row dtype_rows[PC_DTYPE_COUNT] = {
#define PC_DTYPE(name, ctype, size, cls) [PC_##name] = {#name, size, #cls[0]},
#include "ir/dtypes.def"
#undef PC_DTYPE
};

enum { PC_INL_INLINE = 1, PC_INL_STORED = 0 };

static const pc_prim_info prim_rows[PC_OP_COUNT] = {
#define PRIM(name, n_in, n_out, kind, operands, result, fuse, inl)                                  \
  [PC_OP_##name] = {#name, n_in, n_out, PC_KIND_##kind, PC_CLS_##operands, PC_RES_##result,          \
                    PC_FUSE_##fuse, PC_INL_##inl},
#include "ir/prims.def"
#undef PRIM
};

static const char *const status_names[] = {
    [PC_OK] = "ok",
    [PC_ERR_PARSE] = "parse error",
    [PC_ERR_TYPE] = "type error",
    [PC_ERR_SHAPE] = "shape error",
    [PC_ERR_ATTR] = "attribute error",
    [PC_ERR_UNSUPPORTED] = "unsupported",
    [PC_ERR_IO] = "I/O error",
    [PC_ERR_RANGE] = "out of range",
    [PC_ERR_NOMEM] = "out of memory",
    [PC_ERR_INTERNAL] = "internal error",
};

const char *pc_status_name(pc_status s) {
  if ((unsigned)s >= sizeof status_names / sizeof *status_names) return "unknown status";
  return status_names[s];
}

size_t pc_dtype_size(pc_dtype t) { return (unsigned)t < PC_DTYPE_COUNT ? dtype_rows[t].size : 0; }

const char *pc_dtype_name(pc_dtype t) { return (unsigned)t < PC_DTYPE_COUNT ? dtype_rows[t].name : "?"; }

int pc_dtype_from_name(const char *name, pc_dtype *out) {
  for (int i = 0; i < PC_DTYPE_COUNT; i++)
    if (strcmp(dtype_rows[i].name, name) == 0) {
      *out = (pc_dtype)i;
      return 1;
    }
  return 0;
}

static char dtype_class(pc_dtype t) { return (unsigned)t < PC_DTYPE_COUNT ? dtype_rows[t].cls : 0; }

int pc_dtype_is_float(pc_dtype t) { return dtype_class(t) == 'F'; }
int pc_dtype_is_int(pc_dtype t) { return dtype_class(t) == 'I' || dtype_class(t) == 'U'; }
int pc_dtype_is_signed(pc_dtype t) { return dtype_class(t) == 'I' || dtype_class(t) == 'F'; }

const pc_prim_info *pc_prim(pc_op op) { return (unsigned)op < PC_OP_COUNT ? &prim_rows[op] : NULL; }

int pc_op_from_name(const char *name, pc_op *out) {
  for (int i = 0; i < PC_OP_COUNT; i++)
    if (strcmp(prim_rows[i].name, name) == 0) {
      *out = (pc_op)i;
      return 1;
    }
  return 0;
}

int pc_op_is_elementwise(pc_op op) {
  const pc_prim_info *p = pc_prim(op);
  return p && (p->kind != PC_KIND_OTHER || op == PC_OP_where);
}

pc_fuse_kind pc_op_fuse_kind(pc_op op) { return (unsigned)op < PC_OP_COUNT ? prim_rows[op].fuse : PC_FUSE_ALONE; }

int pc_op_is_inline(pc_op op) { return (unsigned)op < PC_OP_COUNT && prim_rows[op].inl; }

pc_type pc_type_make(pc_dtype dt, int rank, const int64_t *dims) {
  pc_type t;
  memset(&t, 0, sizeof t);
  t.dtype = dt;
  t.rank = rank;
  for (int i = 0; i < rank && i < PC_MAX_RANK; i++) t.dims[i] = dims[i];
  return t;
}

int pc_type_equal(const pc_type *a, const pc_type *b) {
  if (a->dtype != b->dtype || a->rank != b->rank) return 0;
  for (int i = 0; i < a->rank; i++)
    if (a->dims[i] != b->dims[i]) return 0;
  return 1;
}

int pc_type_is_static(const pc_type *t) {
  for (int i = 0; i < t->rank; i++)
    if (PC_DIM_IS_SYM(t->dims[i])) return 0;
  return 1;
}

int pc_type_size_ok(const pc_type *t) {
  int64_t n = 1;
  for (int i = 0; i < t->rank; i++) {
    if (PC_DIM_IS_SYM(t->dims[i])) continue;
    /* a 0 dim does not excuse the others: row strides multiply them (fuzz_mutate: [5,0,2^31-1,2^31-1,2^31-1]) */
    int64_t d = t->dims[i] ? t->dims[i] : 1;
    if (t->dims[i] < 0 || __builtin_mul_overflow(n, d, &n) || n > PC_MAX_NUMEL) return 0;
  }
  return 1;
}

int64_t pc_type_numel(const pc_type *t) {
  int64_t n = 1;
  for (int i = 0; i < t->rank; i++) {
    if (PC_DIM_IS_SYM(t->dims[i])) return -1;
    n *= t->dims[i];
  }
  return n;
}

/* ---- half precision: bit manipulation so results do not depend on the host FPU */

uint32_t pc_f32_bits(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  return u;
}

float pc_bits_f32(uint32_t u) {
  float f;
  memcpy(&f, &u, 4);
  return f;
}

float pc_f16_to_f32(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000) << 16;
  uint32_t exp = (h >> 10) & 0x1f, man = h & 0x3ff;
  if (exp == 0x1f) return pc_bits_f32(sign | 0x7f800000u | (man << 13)); /* inf, nan */
  if (exp == 0) {
    if (man == 0) return pc_bits_f32(sign);
    float v = (float)man * (1.0f / 16777216.0f); /* subnormal: man * 2^-24 */
    return sign ? -v : v;
  }
  return pc_bits_f32(sign | ((exp + 112) << 23) | (man << 13));
}

uint16_t pc_f32_to_f16(float f) {
  uint32_t u = pc_f32_bits(f);
  uint16_t sign = (uint16_t)((u >> 16) & 0x8000);
  uint32_t a = u & 0x7fffffffu;
  if (a > 0x7f800000u) return sign | 0x7e00; /* nan */
  if (a >= 0x477ff000u) return sign | 0x7c00; /* overflow to inf (includes rounding up) */
  if (a < 0x38800000u) {                      /* below the smallest normal f16: subnormal or zero */
    if (a < 0x33000000u) return sign;          /* rounds to zero */
    uint32_t e = a >> 23, m = (a & 0x7fffff) | 0x800000;
    int shift = (int)(126 - e);                /* bits to drop to reach the 2^-24 grid */
    uint32_t q = m >> shift, rem = m & ((1u << shift) - 1), half = 1u << (shift - 1);
    if (rem > half || (rem == half && (q & 1))) q++;
    return (uint16_t)(sign | q);
  }
  uint32_t r = a + 0xfff + ((a >> 13) & 1); /* round to nearest even on the 13 dropped bits */
  return (uint16_t)(sign | (((r >> 13) - (112u << 10)) & 0x7fff));
}

float pc_bf16_to_f32(uint16_t h) { return pc_bits_f32((uint32_t)h << 16); }

uint16_t pc_f32_to_bf16(float f) {
  uint32_t u = pc_f32_bits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40); /* quiet nan */
  u += 0x7fff + ((u >> 16) & 1);
  return (uint16_t)(u >> 16);
}

/* ---- 8-bit floats (and the 4-bit f4e2m1, held in the low bits of a byte): one encoder and decoder driven
 * by a row per format */

/* inf+NaNs / no inf, NaN S.1111.111 / NaN 0x80, no -0 / neither inf nor NaN (always saturates) */
typedef enum f8_kind { F8_IEEE, F8_FN, F8_FNUZ, F8_FINITE } f8_kind;

typedef struct f8_format {
  int mbits, bias;
  f8_kind kind;
  uint32_t maxcode; /* largest finite magnitude code */
  uint32_t signbit; /* 0x80, or 0x8 for the 4-bit format */
} f8_format;

static const f8_format f8_e4m3fn = {3, 7, F8_FN, 0x7e, 0x80};
static const f8_format f8_e4m3fnuz = {3, 8, F8_FNUZ, 0x7f, 0x80};
static const f8_format f8_e5m2 = {2, 15, F8_IEEE, 0x7b, 0x80};
static const f8_format f8_e5m2fnuz = {2, 16, F8_FNUZ, 0x7f, 0x80};
static const f8_format f4_e2m1 = {1, 1, F8_FINITE, 0x7, 0x8};

static float f8_decode(const f8_format *fm, uint8_t b) {
  uint32_t mag = b & (fm->signbit - 1), e = mag >> fm->mbits, m = mag & ((1u << fm->mbits) - 1);
  int neg = (b & fm->signbit) != 0;
  if (fm->kind == F8_FNUZ && b == 0x80) return pc_bits_f32(0x7fc00000u);
  if (fm->kind == F8_FN && mag == 0x7f) return pc_bits_f32(neg ? 0xffc00000u : 0x7fc00000u);
  if (fm->kind == F8_IEEE && e == (0x7fu >> fm->mbits))
    return pc_bits_f32((neg ? 0x80000000u : 0) | (m ? 0x7fc00000u : 0x7f800000u));
  /* exact in f32: at most 4 significant bits, exponents within [-17, 15] */
  float v = e ? ldexpf((float)((1u << fm->mbits) | m), (int)e - fm->bias - fm->mbits)
              : ldexpf((float)m, 1 - fm->bias - fm->mbits);
  return neg ? -v : v;
}

/* magnitude code of |f| (finite, a its bits without sign) rounded to nearest even;
 * may exceed maxcode, which the caller treats as overflow */
static uint32_t f8_round(const f8_format *fm, uint32_t a) {
  int ef = (int)(a >> 23), emin = 1 - fm->bias; /* ef: biased f32 exponent */
  if (ef == 0) return 0;                         /* f32 zero or subnormal: far below every f8 step */
  int e = ef - 127;
  if (e >= emin) { /* normal: drop 23 - mbits bits; a carry moves into the exponent as it should */
    int shift = 23 - fm->mbits;
    uint32_t r = a + (1u << (shift - 1)) - 1 + ((a >> shift) & 1);
    return (r >> shift) - ((uint32_t)(127 - fm->bias) << fm->mbits);
  }
  /* subnormal: count steps of 2^(emin - mbits); the f32 significand is m * 2^(e - 23) */
  int s = 23 + emin - fm->mbits - e;
  if (s > 25) return 0;
  uint32_t m = (a & 0x7fffffu) | 0x800000u, q = m >> s, rem = m & ((1u << s) - 1), half = 1u << (s - 1);
  if (rem > half || (rem == half && (q & 1))) q++;
  return q;
}

static uint8_t f8_encode(const f8_format *fm, float f, int saturate) {
  uint32_t u = pc_f32_bits(f), a = u & 0x7fffffffu, sign = u >> 31 ? fm->signbit : 0;
  /* the quiet NaN of each format (e5m2: 0x7e, as a float16 quiet NaN truncated); f4e2m1 has none and,
   * like ml_dtypes (the ONNX reference), gives the zero of the other sign */
  uint32_t nan = fm->kind == F8_FNUZ ? 0x80u
                 : fm->kind == F8_FINITE ? sign ^ fm->signbit
                                         : sign | (fm->kind == F8_IEEE ? 0x7eu : 0x7fu);
  if (a > 0x7f800000u) return (uint8_t)nan;
  uint32_t q = a == 0x7f800000u ? fm->maxcode + 1 : f8_round(fm, a);
  if (q > fm->maxcode) {
    if (saturate || fm->kind == F8_FINITE) return (uint8_t)(sign | fm->maxcode);
    return (uint8_t)(fm->kind == F8_IEEE ? sign | 0x7cu : nan);
  }
  if (q == 0 && fm->kind == F8_FNUZ) return 0;
  return (uint8_t)(sign | q);
}

static const f8_format *f8_format_of(pc_dtype t) {
  static const f8_format *const rows[PC_DTYPE_COUNT] = {
      [PC_f8e4m3fn] = &f8_e4m3fn, [PC_f8e4m3fnuz] = &f8_e4m3fnuz,
      [PC_f8e5m2] = &f8_e5m2,     [PC_f8e5m2fnuz] = &f8_e5m2fnuz, [PC_f4e2m1] = &f4_e2m1,
  };
  return (unsigned)t < PC_DTYPE_COUNT ? rows[t] : NULL;
}

/* f8e8m0 (exponent only, 2^(b-127), 0xff NaN) keeps the exponent field of the f32: the sign is dropped,
 * inf and NaN give NaN, nothing overflows, so saturate changes nothing (as ONNX's Cast rounding "down") */
static float e8m0_decode(uint8_t b) { return b == 0xff ? pc_bits_f32(0x7fc00000u) : b ? pc_bits_f32((uint32_t)b << 23) : 0x1p-127f; }
static uint8_t e8m0_encode(float f) { return (uint8_t)(pc_f32_bits(f) >> 23); }

int pc_dtype_is_f8(pc_dtype t) { return f8_format_of(t) != NULL || t == PC_f8e8m0; }

int pc_dtype_is_narrow_float(pc_dtype t) { return pc_dtype_is_float(t) && pc_dtype_size(t) < 4; }

int pc_dtype_subbyte_bits(pc_dtype t) { return t == PC_i4 || t == PC_u4 ? 4 : t == PC_i2 || t == PC_u2 ? 2 : 0; }

float pc_f8_to_f32(pc_dtype t, uint8_t b) {
  const f8_format *fm = f8_format_of(t);
  if (t == PC_f8e8m0) return e8m0_decode(b);
  return fm ? f8_decode(fm, b) : pc_bits_f32(0x7fc00000u);
}

uint8_t pc_f32_to_f8(pc_dtype t, float f, int saturate) {
  const f8_format *fm = f8_format_of(t);
  if (t == PC_f8e8m0) return e8m0_encode(f);
  return fm ? f8_encode(fm, f, saturate) : 0;
}

double pc_elem_f64(pc_dtype t, const void *p, int64_t i) {
  switch (t) { /* one line per storage type */
  case PC_f16: return pc_f16_to_f32(((const uint16_t *)p)[i]);
  case PC_bf16: return pc_bf16_to_f32(((const uint16_t *)p)[i]);
  case PC_f32: return ((const float *)p)[i];
  case PC_f64: return ((const double *)p)[i];
  case PC_i8: return ((const int8_t *)p)[i];
  case PC_i16: return ((const int16_t *)p)[i];
  case PC_i32: return ((const int32_t *)p)[i];
  case PC_i64: return (double)((const int64_t *)p)[i];
  case PC_u8: case PC_bool: return ((const uint8_t *)p)[i];
  case PC_u16: return ((const uint16_t *)p)[i];
  case PC_i4: case PC_i2: return ((const int8_t *)p)[i];
  case PC_u4: case PC_u2: return ((const uint8_t *)p)[i];
  case PC_u32: return ((const uint32_t *)p)[i];
  case PC_u64: return (double)((const uint64_t *)p)[i];
  case PC_f8e4m3fn: case PC_f8e4m3fnuz: case PC_f8e5m2: case PC_f8e5m2fnuz: case PC_f4e2m1: case PC_f8e8m0:
    return pc_f8_to_f32(t, ((const uint8_t *)p)[i]);
  case PC_c64: return ((const float *)p)[2 * i];
  case PC_DTYPE_COUNT: break;
  }
  return 0;
}

static const char *const matmul_precisions[PC_MATMUL_PRECISION_COUNT] = {"highest", "high", "medium"};

const char *pc_matmul_precision_name(int p) {
  return p >= 0 && p < PC_MATMUL_PRECISION_COUNT ? matmul_precisions[p] : "?";
}

int pc_matmul_precision_parse(const char *s) {
  for (int p = 0; s && p < PC_MATMUL_PRECISION_COUNT; p++)
    if (!strcmp(s, matmul_precisions[p])) return p;
  return -1;
}

static const char *const autocasts[PC_AUTOCAST_COUNT] = {"none", "bf16", "fp16"};

const char *pc_autocast_name(int a) { return a >= 0 && a < PC_AUTOCAST_COUNT ? autocasts[a] : "?"; }

int pc_autocast_parse(const char *s) {
  for (int a = 0; s && a < PC_AUTOCAST_COUNT; a++)
    if (!strcmp(s, autocasts[a])) return a;
  return -1;
}
