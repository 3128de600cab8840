/* tests/unit/test_f8.c: ir/types.c's 8-bit (and f4e2m1) float conversions against ml_dtypes and onnx (tests/data/f8/f8_table.txt). */
#include "ir/ir.h"
#include "tests/test.h"

#include <stdio.h>

static int f8_dtype_of(const char *name, pc_dtype *dt) { return pc_dtype_from_name(name, dt) && pc_dtype_is_f8(*dt); }

static uint32_t f32_bits(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  return u;
}

static float bits_f32(uint32_t u) {
  float f;
  memcpy(&f, &u, 4);
  return f;
}

/* decoded values compare by bits, except that any NaN matches any NaN */
static int same_f32(float got, uint32_t want) {
  return isnan(got) ? isnan(bits_f32(want)) : f32_bits(got) == want;
}

PC_TEST(f8_conversions_match_ml_dtypes) {
  char path[512], line[256], fmt[16];
  snprintf(path, sizeof path, "%s/tests/data/f8/f8_table.txt", pc_test_srcdir());
  FILE *f = fopen(path, "r");
  if (!CHECK_MSG(f != NULL, "cannot open %s (run python3 tests/ref/gen_f8_refs.py)", path)) return;
  int rows = 0, bad = 0, decoded = 0, encoded = 0;
  while (fgets(line, sizeof line, f)) {
    unsigned a, b, c;
    pc_dtype dt;
    char kind;
    if (line[0] == '#' || line[0] == 'C') continue; /* C: ONNX Cast rows, for test_onnx_more.c */
    int n = sscanf(line, "%c %15s %x %x %x", &kind, fmt, &a, &b, &c);
    if (!CHECK_MSG(n >= 4 && f8_dtype_of(fmt, &dt), "bad line: %s", line)) break;
    rows++;
    if (kind == 'D') {
      decoded++;
      float got = pc_f8_to_f32(dt, (uint8_t)a);
      if (!same_f32(got, b) && bad++ < 5) CHECK_MSG(0, "%s byte %02x decodes to %08x, ml_dtypes %08x", fmt, a, f32_bits(got), b);
      continue;
    }
    encoded++;
    float x = bits_f32(a);
    uint8_t plain = pc_f32_to_f8(dt, x, 0), sat = pc_f32_to_f8(dt, x, 1);
    if ((plain != b || sat != c) && bad++ < 5)
      CHECK_MSG(0, "%s of %08x (%g): %02x/%02x (saturate 0/1), reference %02x/%02x", fmt, a, (double)x, plain, sat, b, c);
  }
  fclose(f);
  CHECK_MSG(bad == 0, "%d of %d rows differ", bad, rows);
  CHECK_MSG(decoded == 5 * 256 + 16 && encoded > 4 * 1000, "table too small: %d decoded, %d encoded", decoded, encoded);
}

/* a few bit patterns from the format definitions (OCP FP8, the fnuz variants of Graphcore/AMD), by hand */
PC_TEST(f8_known_patterns) {
  CHECK(pc_f8_to_f32(PC_f8e4m3fn, 0x7e) == 448.0f);
  CHECK(pc_f8_to_f32(PC_f8e4m3fn, 0x01) == 0x1p-9f);
  CHECK(isnan(pc_f8_to_f32(PC_f8e4m3fn, 0xff)));
  CHECK(pc_f8_to_f32(PC_f8e4m3fnuz, 0x7f) == 240.0f);
  CHECK(isnan(pc_f8_to_f32(PC_f8e4m3fnuz, 0x80)));
  CHECK(pc_f8_to_f32(PC_f8e5m2, 0x7b) == 57344.0f);
  CHECK(isinf(pc_f8_to_f32(PC_f8e5m2, 0xfc)) && pc_f8_to_f32(PC_f8e5m2, 0xfc) < 0);
  CHECK(pc_f8_to_f32(PC_f8e5m2fnuz, 0x01) == 0x1p-17f);
  CHECK_INT(pc_f32_to_f8(PC_f8e4m3fn, 464.0f, 0), 0x7e);        /* tie between 448 and 480: even */
  CHECK_INT(pc_f32_to_f8(PC_f8e4m3fn, 465.0f, 0), 0x7f);        /* rounds past the largest: NaN */
  CHECK_INT(pc_f32_to_f8(PC_f8e4m3fn, -INFINITY, 1), 0xfe);     /* saturate: -448 */
  CHECK_INT(pc_f32_to_f8(PC_f8e4m3fnuz, -1e-10f, 0), 0x00);     /* no -0 */
  CHECK_INT(pc_f32_to_f8(PC_f8e5m2, 1e6f, 0), 0x7c);            /* inf */
  CHECK_INT(pc_f32_to_f8(PC_f8e5m2fnuz, INFINITY, 0), 0x80);    /* NaN */
  CHECK_INT(pc_f32_to_f8(PC_f8e5m2fnuz, INFINITY, 1), 0x7f);    /* 57344 */
  CHECK_INT(pc_f32_to_f8(PC_f4e2m1, 5.0f, 0), 0x6);             /* tie between 4 and 6: even (4) */
  CHECK_INT(pc_f32_to_f8(PC_f4e2m1, -1e6f, 0), 0xf);            /* saturates without being asked: -6 */
  CHECK(pc_f8_to_f32(PC_f4e2m1, 0x1) == 0.5f);
  CHECK(pc_f8_to_f32(PC_f8e8m0, 0x7f) == 1.0f);                 /* 2^(b-127) */
  CHECK(pc_f8_to_f32(PC_f8e8m0, 0x00) == 0x1p-127f);            /* no zero */
  CHECK(isnan(pc_f8_to_f32(PC_f8e8m0, 0xff)));
  CHECK_INT(pc_f32_to_f8(PC_f8e8m0, -3.9f, 0), 0x80);            /* sign dropped, rounded down: 2 */
  CHECK_INT(pc_f32_to_f8(PC_f8e8m0, INFINITY, 1), 0xff);         /* NaN, saturate or not */
}
