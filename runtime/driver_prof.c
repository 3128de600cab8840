/* runtime/driver_prof.c: what the standalone driver reports of a --profile build: the per-kernel table (see
 * runtime/driver.c for its format) and a Chrome trace / Perfetto file of every recorded kernel call. */
#include "runtime/primc_rt.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const primc_profile *sort_prof;
static const primc_prof_event *sort_ev;

static int by_total(const void *a, const void *b) {
  int64_t x = sort_prof->kernels[*(const int *)a].ns, y = sort_prof->kernels[*(const int *)b].ns;
  return (x < y) - (x > y);
}

/* events ordered by kernel, then duration */
static int by_kernel_ns(const void *a, const void *b) {
  const primc_prof_event *x = &sort_ev[*(const int64_t *)a], *y = &sort_ev[*(const int64_t *)b];
  if (x->kernel != y->kernel) return (x->kernel > y->kernel) - (x->kernel < y->kernel);
  return (x->ns > y->ns) - (x->ns < y->ns);
}

void primc_driver_profile_print(const primc_model_desc *m, int runs, double run_ms, const primc_prof_event *ev,
                                int64_t n_ev) {
  const primc_profile *p = m->profile;
  int *order = malloc(sizeof *order * (size_t)(p->n_kernels + 1));
  int64_t *lo = calloc((size_t)p->n_kernels + 1, sizeof *lo), *med = calloc((size_t)p->n_kernels + 1, sizeof *med);
  int64_t *idx = ev && n_ev ? malloc(sizeof *idx * (size_t)n_ev) : NULL;
  if (!order || !lo || !med) goto done;
  /* per call: the min and median of each kernel's recorded calls (-1: none recorded) */
  for (int i = 0; i < p->n_kernels; i++) lo[i] = med[i] = -1;
  if (idx) {
    for (int64_t i = 0; i < n_ev; i++) idx[i] = i;
    sort_ev = ev;
    qsort(idx, (size_t)n_ev, sizeof *idx, by_kernel_ns);
    for (int64_t a = 0, b; a < n_ev; a = b) {
      int32_t k = ev[idx[a]].kernel;
      for (b = a; b < n_ev && ev[idx[b]].kernel == k; b++) {
      }
      if (k >= 0 && k < p->n_kernels) lo[k] = ev[idx[a]].ns, med[k] = ev[idx[a + (b - a) / 2]].ns;
    }
  }
  int n = 0;
  int64_t total = 0;
  for (int i = 0; i < p->n_kernels; i++)
    if (p->kernels[i].calls) order[n++] = i, total += p->kernels[i].ns;
  sort_prof = p;
  qsort(order, (size_t)n, sizeof *order, by_total);
  printf("# profile %s: %d runs, %d threads, %.4f ms/run median, kernels %.4f ms/run\n", m->name, runs,
         primc_num_threads(), run_ms, (double)total / 1e6 / (runs > 0 ? runs : 1));
  printf("%-6s  %-40s  %-32s  %7s  %10s  %5s  %12s  %9s  %9s\n", "kernel", "name", "origin", "calls", "total_ms", "pct",
         "bytes_moved", "min_ms", "median_ms");
  for (int i = 0; i < n; i++) {
    int k = order[i];
    const primc_prof_kernel *pk = &p->kernels[k];
    char id[16], mn[32], md[32];
    snprintf(id, sizeof id, "k%d", k);
    snprintf(mn, sizeof mn, lo[k] < 0 ? "-" : "%.4f", (double)lo[k] / 1e6);
    snprintf(md, sizeof md, med[k] < 0 ? "-" : "%.4f", (double)med[k] / 1e6);
    printf("%-6s  %-40s  %-32s  %7lld  %10.4f  %5.1f  %12lld  %9s  %9s\n", id, pk->name, pk->origin,
           (long long)pk->calls, (double)pk->ns / 1e6, total ? 100.0 * (double)pk->ns / (double)total : 0.0,
           (long long)pk->bytes, mn, md);
  }
  printf("# total %.4f ms over %d runs\n", (double)total / 1e6, runs);
done:
  free(order), free(lo), free(med), free(idx);
}

/* s as the inside of a JSON string */
static void json_text(FILE *f, const char *s) {
  for (; s && *s; s++) {
    unsigned char c = (unsigned char)*s;
    if (c == '"' || c == '\\') fprintf(f, "\\%c", c);
    else if (c < 0x20) fprintf(f, "\\u%04x", c);
    else fputc(c, f);
  }
}

/* the kernel call (on the calling thread) whose interval holds t, -1 when none: calls are in time order */
static int64_t call_at(const primc_prof_event *ev, const int64_t *calls, int64_t n, int64_t t) {
  int64_t lo = 0, hi = n - 1, at = -1;
  while (lo <= hi) {
    int64_t mid = (lo + hi) / 2;
    if (ev[calls[mid]].t0 <= t) at = mid, lo = mid + 1;
    else hi = mid - 1;
  }
  return at >= 0 && t < ev[calls[at]].t0 + ev[calls[at]].ns ? calls[at] : -1;
}

static void trace_event(FILE *f, const primc_model_desc *m, const primc_prof_event *call, int tid, int64_t ts,
                        int64_t ns) {
  const primc_prof_kernel *k = call ? &m->profile->kernels[call->kernel] : NULL;
  fprintf(f, ",\n{\"name\": \"");
  if (k) fprintf(f, "k%d ", (int)call->kernel);
  json_text(f, k ? k->name : "pool work");
  fprintf(f, "\", \"cat\": \"%s\", \"ph\": \"X\", \"ts\": %.3f, \"dur\": %.3f, \"pid\": 1, \"tid\": %d, \"args\": "
             "{\"origin\": \"", tid == 1 ? "kernel" : "share", (double)ts / 1e3, (double)ns / 1e3, tid);
  json_text(f, k ? k->origin : "-");
  fprintf(f, "\", \"bytes_moved\": %lld}}", k ? (long long)k->bytes : 0LL);
}

int primc_driver_trace_write(const char *path, const primc_model_desc *m, const primc_prof_event *ev, int64_t n_ev) {
  int64_t *calls = malloc(sizeof *calls * (size_t)(n_ev + 1)), n_calls = 0, t0 = n_ev ? ev[0].t0 : 0;
  if (!calls) return fprintf(stderr, "error: out of memory\n"), 1;
  int max_thread = 0;
  for (int64_t i = 0; i < n_ev; i++) {
    int ok = ev[i].kernel >= 0 && ev[i].kernel < m->profile->n_kernels;
    if (ok) calls[n_calls++] = i;
    if (ev[i].t0 < t0) t0 = ev[i].t0;
    if (!ok && ev[i].thread > max_thread) max_thread = ev[i].thread;
  }
  FILE *f = fopen(path, "w");
  if (!f) return free(calls), fprintf(stderr, "error: cannot write %s\n", path), 1;
  fprintf(f, "{\"displayTimeUnit\": \"ns\", \"otherData\": {\"model\": \"");
  json_text(f, m->name);
  fprintf(f, "\", \"threads\": %d}, \"traceEvents\": [\n", primc_num_threads());
  fprintf(f, "{\"name\": \"thread_name\", \"ph\": \"M\", \"pid\": 1, \"tid\": 1, \"args\": {\"name\": \"kernels "
             "(the calling thread, which also runs share 0 of each parallel kernel)\"}}");
  for (int t = 1; t <= max_thread; t++)
    fprintf(f, ",\n{\"name\": \"thread_name\", \"ph\": \"M\", \"pid\": 1, \"tid\": %d, \"args\": {\"name\": "
               "\"pool thread %d\"}}", t + 1, t);
  for (int64_t i = 0; i < n_ev; i++) {
    const primc_prof_event *e = &ev[i];
    if (e->kernel >= 0 && e->kernel < m->profile->n_kernels) {
      trace_event(f, m, e, 1, e->t0 - t0, e->ns);
    } else if (e->kernel < 0) {
      int64_t c = call_at(ev, calls, n_calls, e->t0);
      trace_event(f, m, c >= 0 ? &ev[c] : NULL, e->thread + 1, e->t0 - t0, e->ns);
    }
  }
  fprintf(f, "\n]}\n");
  free(calls);
  if (fclose(f) != 0) return fprintf(stderr, "error: cannot write %s\n", path), 1;
  return 0;
}
