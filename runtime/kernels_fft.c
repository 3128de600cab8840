/* runtime/kernels_fft.c: the fft kernel: fft, ifft, rfft, irfft by a naive DFT in double precision, numpy's conventions. */
#include "runtime/kernels.h"

/* ---------------------------------------------------------------- fft */

/* X[k] = sum_t x[t] e^(sign 2 pi i k t / n), naive in double precision; reads at most m inputs, zero beyond */
static void dft(const double *re, const double *im, int64_t m, int64_t n, int sign, int64_t nk, double *ore,
                double *oim) {
  for (int64_t k = 0; k < nk; k++) {
    double sr = 0, si = 0;
    for (int64_t t = 0; t < m && t < n; t++) {
      double a = sign * 2 * M_PI * (double)((k * t) % n) / (double)n, c = cos(a), s = sin(a);
      sr += re[t] * c - im[t] * s;
      si += re[t] * s + im[t] * c;
    }
    ore[k] = sr;
    oim[k] = si;
  }
}

/* params: dtype, in shape, out shape, type (0 fft, 1 ifft, 2 rfft, 3 irfft), length; numpy's conventions
 * (ifft and irfft scaled by 1/n); bufs: out, in, scratch (4 * max(in, out) last dim doubles) */
int primc_k_fft(const int64_t *q, void *const *bufs) {
  shp in, out;
  const int64_t *r = get_shape(get_shape(q + 1, &in), &out);
  int type = (int)r[0];
  int64_t n = r[1], mi = in.d[in.rank - 1], mo = out.d[out.rank - 1], rows = numel(&in) / (mi ? mi : 1);
  int64_t w = (mi > mo ? mi : mo) > n ? (mi > mo ? mi : mo) : n;
  double *re = bufs[2], *im = re + w, *ore = im + w, *oim = ore + w;
  const float *src = bufs[1];
  float *dst = bufs[0];
  for (int64_t row = 0; row < rows; row++) {
    int cin = type != 2, cout = type != 3;
    for (int64_t t = 0; t < w; t++) re[t] = im[t] = 0;
    for (int64_t t = 0; t < mi; t++) {
      re[t] = src[(row * mi + t) * (cin ? 2 : 1)];
      im[t] = cin ? src[(row * mi + t) * 2 + 1] : 0;
    }
    int64_t m = mi;
    if (type == 3) { /* hermitian extension; numpy drops the imaginary parts of X[0] and X[n/2] */
      im[0] = 0;
      if (n % 2 == 0 && n / 2 < mi) im[n / 2] = 0;
      for (int64_t k = n / 2 + 1; k < n; k++) re[k] = re[n - k], im[k] = -im[n - k];
      m = n;
    }
    dft(re, im, m, n, type == 1 || type == 3 ? 1 : -1, mo, ore, oim);
    double scale = type == 1 || type == 3 ? 1.0 / (double)n : 1.0;
    for (int64_t k = 0; k < mo; k++) {
      if (cout) {
        dst[(row * mo + k) * 2] = (float)(ore[k] * scale);
        dst[(row * mo + k) * 2 + 1] = (float)(oim[k] * scale);
      } else {
        dst[row * mo + k] = (float)(ore[k] * scale);
      }
    }
  }
  return PRIMC_OK;
}
