/* runtime/driver_io.c: what the CPU and CUDA standalone mains share: inputs (.npy or random), output summary and files, timing. */
#include "runtime/primc_rt.h"

#include <limits.h>
#include <sys/mman.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

int primc_driver_parse(int argc, char **argv, const char *usage, const char *model, int n_inputs,
                       primc_driver_opts *o, primc_driver_flag own, void *ctx) {
  memset(o, 0, sizeof *o);
  o->seed = 1;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    int has = i + 1 < argc;
    if (!strcmp(a, "--random-inputs")) o->random = 1;
    else if (!strcmp(a, "-o") && has) o->out_dir = argv[++i];
    else if (!strcmp(a, "--bench") && has) {
      char *end;
      long n = strtol(argv[++i], &end, 10);
      if (end == argv[i] || *end || n < 1 || n > INT_MAX)
        return fprintf(stderr, "error: --bench takes a number of runs (1 or more), not '%s'\n", argv[i]), 2;
      o->bench = (int)n;
    } else if (!strcmp(a, "--seed") && has) {
      char *end;
      o->seed = strtoull(argv[++i], &end, 10);
      if (end == argv[i] || *end || argv[i][0] == '-')
        return fprintf(stderr, "error: --seed takes a number, not '%s'\n", argv[i]), 2;
    }
    else if (own(ctx, argc, argv, &i)) continue;
    else if (!strcmp(a, "-h") || !strcmp(a, "--help")) return fprintf(stdout, usage, argv[0]), 1;
    else if (a[0] == '-' && a[1]) return fprintf(stderr, usage, argv[0]), 2;
    else if (o->n_ins < PRIMC_DRIVER_MAX_IO) o->ins[o->n_ins++] = a;
  }
  if (!o->random && o->n_ins != n_inputs) {
    fprintf(stderr, "error: %s expects %d input(s), got %d (or pass --random-inputs)\n", model, n_inputs, o->n_ins);
    return 2;
  }
  return 0;
}

static uint64_t next_rand(uint64_t *s) {
  *s ^= *s << 13;
  *s ^= *s >> 7;
  *s ^= *s << 17;
  return *s;
}

static void fill_random(primc_array *a, uint64_t *s) {
  int64_t n = primc_array_numel(a);
  for (int64_t i = 0; i < n; i++) {
    uint64_t r = next_rand(s);
    double u = (double)(r >> 11) / 9007199254740992.0 * 2 - 1;
    switch (a->dtype) { /* one fill per storage type */
    case PRIMC_F32: ((float *)a->data)[i] = (float)u; break;
    case PRIMC_F64: ((double *)a->data)[i] = u; break;
    case PRIMC_BOOL: ((uint8_t *)a->data)[i] = r & 1; break;
    case PRIMC_I32: ((int32_t *)a->data)[i] = (int32_t)(r % 10); break;
    case PRIMC_I64: ((int64_t *)a->data)[i] = (int64_t)(r % 10); break;
    default: ((uint8_t *)a->data)[(size_t)i * primc_dtype_size(a->dtype)] = (uint8_t)(r % 10); break; /* low byte */
    }
  }
}

static void dims_text(char *buf, size_t n, int rank, const int64_t *dims) {
  size_t k = (size_t)snprintf(buf, n, "[");
  for (int i = 0; i < rank && k < n; i++) k += (size_t)snprintf(buf + k, n - k, "%s%lld", i ? "," : "", (long long)dims[i]);
  if (k < n) snprintf(buf + k, n - k, "]");
}

/* the first difference named: dtype, rank, then the dim, with what the model was compiled for */
/* syms: the symbol of each dim (run-time dims, checked by primc_dims_check), NULL when every dim is fixed */
static int check_input(const primc_tensor_desc *d, const primc_array *a, const char *path, const int32_t *syms) {
  char want[160], got[160];
  dims_text(want, sizeof want, d->rank, d->dims);
  dims_text(got, sizeof got, a->rank, a->dims);
  if ((int)a->dtype != d->dtype)
    return fprintf(stderr, "error: %s: input \"%s\" takes dtype code %d, the file holds code %d (codes as "
                   "NAME_INPUTi_DTYPE in the header)\n", path, d->name, d->dtype, (int)a->dtype), 0;
  if (a->rank != d->rank)
    return fprintf(stderr, "error: %s: input \"%s\" takes rank %d %s, the file holds rank %d %s\n", path, d->name,
                   d->rank, want, a->rank, got), 0;
  for (int i = 0; i < d->rank; i++)
    if (a->dims[i] != d->dims[i] && !(syms && syms[i] >= 0))
      return fprintf(stderr, "error: %s: input \"%s\" dim %d is %lld, the model was compiled for %lld (%s, the file "
                     "holds %s)\n", path, d->name, i, (long long)a->dims[i], (long long)d->dims[i], want, got), 0;
  return 1;
}

/* Large buffers in 2 MB pages where the kernel gives them on request (transparent huge pages in "madvise"
 * mode, as on these VMs): a ResNet-18 run walked 67 MB of workspace besides 47 MB of weights, and its TLB misses
 * with 4 KB pages cost about 2% on 1 thread and 4% on 2 (runs in ABBA order, mean 14.87 -> 14.59 ms and 7.78 ->
 * 7.49); a training step's workspace and state are larger still. Where they are refused, the pages stay small. */
#define HUGE_PAGE ((size_t)2 << 20)
void *primc_driver_big_alloc(size_t n) {
  size_t size = (n + 63) / 64 * 64 + 64;
  if (size < HUGE_PAGE) return aligned_alloc(64, size);
  size = (size + HUGE_PAGE - 1) / HUGE_PAGE * HUGE_PAGE;
  void *p = aligned_alloc(HUGE_PAGE, size);
#ifdef MADV_HUGEPAGE
  if (p) (void)madvise(p, size, MADV_HUGEPAGE); /* a hint: refused, the pages stay small */
#endif
  return p;
}

/* the read-only file mappings of this process (/proc/self/maps: no 'w', an inode) as lo, hi pairs; *n of them */
static uintptr_t *read_only_file_maps(int *n) {
  FILE *f = fopen("/proc/self/maps", "r");
  uintptr_t *m = NULL;
  int cap = 0;
  *n = 0;
  if (!f) return NULL;
  char line[512];
  while (fgets(line, sizeof line, f)) {
    unsigned long lo, hi, inode;
    char perms[8];
    if (sscanf(line, "%lx-%lx %7s %*s %*s %lu", &lo, &hi, perms, &inode) != 4 || perms[1] == 'w' || !inode) continue;
    if (*n == cap) {
      uintptr_t *grown = realloc(m, sizeof *m * 2 * (size_t)(cap = cap ? 2 * cap : 64));
      if (!grown) break;
      m = grown;
    }
    m[2 * *n] = lo, m[2 * *n + 1] = hi, ++*n;
  }
  fclose(f);
  return m;
}

void primc_driver_drop_file_pages(const void *const *p, const size_t *bytes, int count) {
  long pg = sysconf(_SC_PAGESIZE);
  int n = 0;
  uintptr_t *maps = pg > 0 ? read_only_file_maps(&n) : NULL; /* read once for every range */
  for (int i = 0; maps && i < count; i++) {
    if (!p[i]) continue;
    uintptr_t a = ((uintptr_t)p[i] + (uintptr_t)pg - 1) / (uintptr_t)pg * (uintptr_t)pg;
    uintptr_t e = ((uintptr_t)p[i] + bytes[i]) / (uintptr_t)pg * (uintptr_t)pg;
    /* on an unwritten private file mapping the pages come back from the file if read again */
    for (int k = 0; e > a && k < n; k++)
      if (maps[2 * k] <= a && e <= maps[2 * k + 1]) {
        (void)madvise((void *)a, e - a, MADV_DONTNEED);
        break;
      }
  }
  free(maps);
}

int primc_driver_alloc(const primc_tensor_desc *d, primc_array *a) {
  a->dtype = (primc_dtype)d->dtype;
  a->rank = d->rank;
  memcpy(a->dims, d->dims, sizeof a->dims);
  size_t n = (size_t)primc_array_numel(a) * primc_dtype_size(a->dtype);
  a->data = primc_driver_big_alloc(n);
  if (!a->data) return fprintf(stderr, "error: out of memory\n"), 1;
  memset(a->data, 0, n);
  return 0;
}

int primc_driver_inputs(const primc_tensor_desc *d, int n, const char *const *paths, unsigned long long seed,
                        primc_array *ins, const int32_t *syms) {
  uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
  char err[256];
  for (int i = 0; i < n; i++) {
    if (!paths) {
      if (primc_driver_alloc(&d[i], &ins[i])) return 1;
      fill_random(&ins[i], &s);
    } else if (primc_npy_read(paths[i], &ins[i], err, sizeof err) != 0) {
      return fprintf(stderr, "error: %s: %s\n", paths[i], err), 1;
    } else if (!check_input(&d[i], &ins[i], paths[i], syms ? syms + i * PRIMC_MAX_RANK : NULL)) {
      return 1;
    }
  }
  return 0;
}

void primc_driver_summary(const primc_tensor_desc *d, const primc_array *outs, int n) {
  for (int i = 0; i < n; i++) {
    const primc_array *a = &outs[i];
    printf("out%d ", i), primc_text_put(stdout, d[i].name), printf(" [");
    for (int k = 0; k < a->rank; k++) printf("%s%lld", k ? "," : "", (long long)a->dims[k]);
    printf("]");
    if (a->dtype == PRIMC_F32) {
      double s = 0;
      for (int64_t k = 0; k < primc_array_numel(a); k++) s += ((const float *)a->data)[k];
      printf(" sum=%.6g", s);
    }
    printf("\n");
  }
}

int primc_driver_write(const char *dir, const primc_array *outs, int n) {
  char err[256], path[4096];
  mkdir(dir, 0777); /* an existing one is fine */
  for (int i = 0; i < n; i++) {
    snprintf(path, sizeof path, "%s/out%d.npy", dir, i);
    if (primc_npy_write(path, &outs[i], err, sizeof err) != 0) return fprintf(stderr, "error: %s: %s\n", path, err), 1;
  }
  return 0;
}

double primc_now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

void primc_sort_ms(double *t, int n) { qsort(t, (size_t)n, sizeof *t, cmp_double); }
