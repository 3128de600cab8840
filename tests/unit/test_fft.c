/* tests/unit/test_fft.c: primc_k_fft (radix-2 and Bluestein) against a DFT summed in long double here, for lengths
 * that are powers of two, primes and composites, every type (fft ifft rfft irfft), inputs cut and zero-padded. */
#include "runtime/primc_rt.h"
#include "tests/test.h"

#include <math.h>
#include <stdlib.h>

/* X[k] = sum_{t < min(m, n)} x[t] e^(sign 2 pi i k t / n), x complex (interleaved) */
static void ref_dft(const long double *x, int64_t m, int64_t n, int sign, long double *out) {
  for (int64_t k = 0; k < n; k++) {
    long double sr = 0, si = 0;
    for (int64_t t = 0; t < m && t < n; t++) {
      long double a = sign * 2 * 3.14159265358979323846264338327950288L * (long double)((k * t) % n) / (long double)n;
      sr += x[2 * t] * cosl(a) - x[2 * t + 1] * sinl(a);
      si += x[2 * t] * sinl(a) + x[2 * t + 1] * cosl(a);
    }
    out[2 * k] = sr, out[2 * k + 1] = si;
  }
}

static int64_t *shape_params(int64_t *q, int64_t rows, int64_t last) {
  q[0] = 2, q[1] = rows, q[2] = last;
  for (int i = 3; i <= 8; i++) q[i] = 0;
  return q + 9;
}

/* one transform of rows x mi inputs to length n; the max error over outputs relative to the largest |X| */
static double run_one(int type, int64_t rows, int64_t mi, int64_t n) {
  int cin = type != 2, cout = type != 3;
  int64_t mo = type == 2 ? n / 2 + 1 : n;
  int64_t q[1 + 18 + 2];
  q[0] = cin ? PRIMC_C64 : PRIMC_F32;
  int64_t *r = shape_params(shape_params(q + 1, rows, mi), rows, mo);
  r[0] = type, r[1] = n;
  float *in = calloc((size_t)(rows * mi * 2 + 1), sizeof *in), *out = calloc((size_t)(rows * mo * 2 + 1), sizeof *out);
  int64_t w = mi > n ? mi : n;
  void *scratch = malloc((size_t)primc_fft_scratch_bytes(w));
  long double *x = calloc((size_t)(2 * n + 2 * mi + 2), sizeof *x), *X = calloc((size_t)(2 * n + 2), sizeof *X);
  unsigned s = 7;
  for (int64_t i = 0; i < rows * mi * (cin ? 2 : 1); i++) s = s * 1103515245u + 12345u, in[i] = (float)((s >> 9) % 2001) / 1000.f - 1;
  void *bufs[3] = {out, in, scratch};
  CHECK_INT(primc_k_fft(q, bufs), PRIMC_OK);
  double worst = 0;
  for (int64_t row = 0; row < rows; row++) {
    for (int64_t t = 0; t < 2 * n + 2 * mi; t++) x[t] = 0;
    for (int64_t t = 0; t < mi && t < n; t++) {
      x[2 * t] = in[(row * mi + t) * (cin ? 2 : 1)];
      x[2 * t + 1] = cin ? in[(row * mi + t) * 2 + 1] : 0;
    }
    if (type == 3) { /* numpy's irfft: hermitian, X[0] and X[n/2] taken real */
      x[1] = 0;
      if (n % 2 == 0 && n / 2 < mi) x[n + 1] = 0;
      for (int64_t k = n / 2 + 1; k < n; k++) x[2 * k] = x[2 * (n - k)], x[2 * k + 1] = -x[2 * (n - k) + 1];
    }
    ref_dft(x, type == 3 ? n : mi, n, type == 1 || type == 3 ? 1 : -1, X);
    long double scale = type == 1 || type == 3 ? 1.0L / n : 1, big = 1e-30L;
    for (int64_t k = 0; k < mo; k++) big = fmaxl(big, fabsl(X[2 * k] * scale) + fabsl(X[2 * k + 1] * scale));
    for (int64_t k = 0; k < mo; k++) {
      long double er = fabsl(out[(row * mo + k) * (cout ? 2 : 1)] - X[2 * k] * scale);
      long double ei = cout ? fabsl(out[(row * mo + k) * 2 + 1] - X[2 * k + 1] * scale) : 0;
      double e = (double)((er + ei) / big);
      if (e > worst) worst = e;
    }
  }
  free(in), free(out), free(scratch), free(x), free(X);
  return worst;
}

PC_TEST(fft_every_length_and_type_against_long_double_dft) {
  static const int64_t lengths[] = {1, 2, 3, 4, 5, 6, 7, 8, 12, 15, 16, 17, 31, 32, 100, 127, 128, 243, 1000, 2048};
  static const char *const names[] = {"fft", "ifft", "rfft", "irfft"};
  for (size_t i = 0; i < sizeof lengths / sizeof *lengths; i++)
    for (int type = 0; type < 4; type++) {
      int64_t n = lengths[i], mi = type == 3 ? n / 2 + 1 : n;
      double e = run_one(type, 2, mi, n);
      /* float outputs of sums of n terms: a few float ulps of the largest value */
      CHECK_MSG(e < 4e-7, "%s of length %lld: error %.3g of max |X|", names[type], (long long)n, e);
    }
  /* inputs longer than n are cut, shorter ones zero-padded */
  CHECK_MSG(run_one(0, 3, 40, 25) < 4e-7, "fft of 40 inputs at length 25");
  CHECK_MSG(run_one(2, 3, 9, 64) < 4e-7, "rfft of 9 inputs at length 64");
  CHECK_MSG(run_one(1, 1, 7, 1024) < 4e-7, "ifft of 7 inputs at length 1024");
}
