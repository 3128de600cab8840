/* runtime/kernels_fft.c: the fft kernel: fft, ifft, rfft, irfft over the last dim in double precision with numpy's
 * conventions, O(n log n) for every length: an iterative radix-2 FFT for powers of two, Bluestein's chirp-z
 * (a convolution done by radix-2 FFTs of a power of two >= 2n - 1) for the rest. */
#include "runtime/kernels.h"

/* ---------------------------------------------------------------- radix-2 */

static int64_t pow2_at_least(int64_t n) {
  int64_t m = 1;
  while (m < n) m *= 2;
  return m;
}

/* the twiddles of each stage together, read in order by its butterflies: the stage of half-length h has
 * e^(-2 pi i j / 2h) for j < h at complex index h + j (m - 1 of them in all) */
static void twiddles(double *tw, int64_t m) {
  for (int64_t h = 1; h < m; h *= 2)
    for (int64_t j = 0; j < h; j++) {
      double a = -M_PI * (double)j / (double)h;
      tw[2 * (h + j)] = cos(a), tw[2 * (h + j) + 1] = sin(a);
    }
}

/* in place on m interleaved complex values (m a power of two): X[k] = sum_t z[t] e^(-+2 pi i k t / m), the sign
 * + when inverse (no scaling) */
static void fft2(double *z, int64_t m, const double *tw, int inverse) {
  for (int64_t i = 1, j = 0; i < m; i++) { /* bit-reversed order */
    int64_t bit = m >> 1;
    for (; j & bit; bit >>= 1) j ^= bit;
    j ^= bit;
    if (i < j) {
      double r = z[2 * i], s = z[2 * i + 1];
      z[2 * i] = z[2 * j], z[2 * i + 1] = z[2 * j + 1];
      z[2 * j] = r, z[2 * j + 1] = s;
    }
  }
  double sg = inverse ? -1 : 1;
  for (int64_t half = 1; half < m; half *= 2) {
    const double *w = tw + 2 * half;
    for (int64_t b = 0; b < m; b += 2 * half)
      for (int64_t j = 0; j < half; j++) {
        double wr = w[2 * j], wi = sg * w[2 * j + 1];
        double *u = z + 2 * (b + j), *v = z + 2 * (b + j + half);
        double tr = v[0] * wr - v[1] * wi, ti = v[0] * wi + v[1] * wr;
        v[0] = u[0] - tr, v[1] = u[1] - ti;
        u[0] += tr, u[1] += ti;
      }
  }
}

/* ---------------------------------------------------------------- any length */

/* A transform of length n: radix-2 on M = n when n is a power of two, else Bluestein on M >= 2n - 1 with
 * X[k] = c[k] sum_t (x[t] c[t]) conj(c[k - t]), c[t] = e^(-+i pi t^2 / n), the convolution by FFTs of M */
typedef struct fft_plan {
  int64_t n, m;
  int inverse, bluestein;
  double *z, *tw, *chirp, *filt; /* z: 2m work, tw: 2m (m - 1 twiddles), chirp: 2n, filt: 2m (the FFT of conj(c)) */
} fft_plan;

int64_t primc_fft_scratch_bytes(int64_t n) {
  int64_t m = pow2_at_least(2 * (n > 0 ? n : 1));
  return (int64_t)sizeof(double) * (6 * m + 2 * n + 8);
}

static void plan_init(fft_plan *p, int64_t n, int inverse, double *scratch) {
  p->n = n, p->inverse = inverse;
  p->bluestein = (n & (n - 1)) != 0;
  p->m = p->bluestein ? pow2_at_least(2 * n - 1) : n;
  p->z = scratch, p->tw = p->z + 2 * p->m, p->chirp = p->tw + 2 * p->m, p->filt = p->chirp + 2 * n;
  twiddles(p->tw, p->m);
  if (!p->bluestein) return;
  double sg = inverse ? 1 : -1;
  for (int64_t t = 0; t < n; t++) { /* t^2 mod 2n keeps the angle exact for large t */
    double a = sg * M_PI * (double)((t * t) % (2 * n)) / (double)n;
    p->chirp[2 * t] = cos(a), p->chirp[2 * t + 1] = sin(a);
  }
  double *f = p->filt;
  for (int64_t i = 0; i < 2 * p->m; i++) f[i] = 0;
  for (int64_t t = 0; t < n; t++) { /* conj(c[t]) at t and at m - t: the convolution is circular */
    f[2 * t] = p->chirp[2 * t], f[2 * t + 1] = -p->chirp[2 * t + 1];
    if (t) f[2 * (p->m - t)] = f[2 * t], f[2 * (p->m - t) + 1] = f[2 * t + 1];
  }
  fft2(f, p->m, p->tw, 0);
}

/* p->z holds n complex inputs; their transform replaces them (the first n) */
static void plan_run(const fft_plan *p) {
  double *z = p->z;
  if (!p->bluestein) return fft2(z, p->n, p->tw, p->inverse);
  const double *c = p->chirp, *f = p->filt;
  int64_t n = p->n, m = p->m;
  for (int64_t t = 0; t < n; t++) {
    double r = z[2 * t] * c[2 * t] - z[2 * t + 1] * c[2 * t + 1], i = z[2 * t] * c[2 * t + 1] + z[2 * t + 1] * c[2 * t];
    z[2 * t] = r, z[2 * t + 1] = i;
  }
  for (int64_t t = 2 * n; t < 2 * m; t++) z[t] = 0;
  fft2(z, m, p->tw, 0);
  for (int64_t k = 0; k < m; k++) {
    double r = z[2 * k] * f[2 * k] - z[2 * k + 1] * f[2 * k + 1], i = z[2 * k] * f[2 * k + 1] + z[2 * k + 1] * f[2 * k];
    z[2 * k] = r, z[2 * k + 1] = i;
  }
  fft2(z, m, p->tw, 1);
  double s = 1.0 / (double)m;
  for (int64_t k = 0; k < n; k++) {
    double r = (z[2 * k] * c[2 * k] - z[2 * k + 1] * c[2 * k + 1]) * s;
    double i = (z[2 * k] * c[2 * k + 1] + z[2 * k + 1] * c[2 * k]) * s;
    z[2 * k] = r, z[2 * k + 1] = i;
  }
}

/* ---------------------------------------------------------------- the kernel */

/* params: dtype, in shape, out shape, type (0 fft, 1 ifft, 2 rfft, 3 irfft), length n; numpy's conventions
 * (inputs cut or zero-padded to n, ifft and irfft scaled by 1/n, irfft's input completed hermitian with the
 * imaginary parts of X[0] and X[n/2] dropped); bufs: out, in, scratch (primc_fft_scratch_bytes of the largest of
 * n and both last dims) */
int primc_k_fft(const int64_t *q, void *const *bufs) {
  shp in, out;
  const int64_t *r = get_shape(get_shape(q + 1, &in), &out);
  int type = (int)r[0];
  int64_t n = r[1], mi = in.d[in.rank - 1], mo = out.d[out.rank - 1], rows = numel(&in) / (mi ? mi : 1);
  if (n < 1) return PRIMC_ERR_ARG;
  int inverse = type == 1 || type == 3, cin = type != 2, cout = type != 3;
  fft_plan p;
  plan_init(&p, n, inverse, bufs[2]);
  double *z = p.z, scale = inverse ? 1.0 / (double)n : 1.0;
  const float *src = bufs[1];
  float *dst = bufs[0];
  for (int64_t row = 0; row < rows; row++) {
    for (int64_t t = 0; t < 2 * n; t++) z[t] = 0;
    for (int64_t t = 0; t < mi && t < n; t++) {
      z[2 * t] = src[(row * mi + t) * (cin ? 2 : 1)];
      z[2 * t + 1] = cin ? src[(row * mi + t) * 2 + 1] : 0;
    }
    if (type == 3) { /* hermitian extension of the first n/2 + 1 values */
      z[1] = 0;
      if (n % 2 == 0 && n / 2 < mi) z[n + 1] = 0;
      for (int64_t k = n / 2 + 1; k < n; k++) z[2 * k] = z[2 * (n - k)], z[2 * k + 1] = -z[2 * (n - k) + 1];
    }
    plan_run(&p);
    for (int64_t k = 0; k < mo; k++) {
      double re = k < n ? z[2 * k] * scale : 0, im = k < n ? z[2 * k + 1] * scale : 0;
      if (cout) dst[(row * mo + k) * 2] = (float)re, dst[(row * mo + k) * 2 + 1] = (float)im;
      else dst[row * mo + k] = (float)re;
    }
  }
  return PRIMC_OK;
}
