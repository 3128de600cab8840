/* runtime/train.c: the training loop of `primc compile --train` executables (runtime/driver.c calls it):
 * batches cut from .npy datasets, the state passed from each step's outputs to the next one's inputs (one
 * buffer set updated in place where the step allows, else two sets swapped), the loss printed, and the weights
 * saved as safetensors. */
#include "runtime/primc_mt19937.h"
#include "runtime/primc_rt.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* safetensors' dtype names of the state dtypes */
static const char *st_dtype(primc_dtype t) {
  switch (t) { /* the float types a state can have */
  case PRIMC_F32: return "F32";
  case PRIMC_F64: return "F64";
  case PRIMC_F16: return "F16";
  case PRIMC_BF16: return "BF16";
  default: return NULL;
  }
}

static void json_string(FILE *f, const char *s) {
  fputc('"', f);
  for (; *s; s++) {
    unsigned char c = (unsigned char)*s;
    if (c == '"' || c == '\\') fprintf(f, "\\%c", c);
    else if (c < 0x20) fprintf(f, "\\u%04x", c);
    else fputc(c, f);
  }
  fputc('"', f);
}

/* safetensors: an 8-byte little-endian header length, the JSON header (padded with spaces to 8 bytes),
 * the tensors back to back */
static int save_safetensors(const char *path, const primc_tensor_desc *d, void *const *data, int n) {
  char *hdr = NULL;
  size_t hlen = 0;
  FILE *h = open_memstream(&hdr, &hlen);
  if (!h) return fprintf(stderr, "error: out of memory\n"), 1;
  int64_t at = 0;
  fputc('{', h);
  for (int i = 0; i < n; i++) {
    const char *dt = st_dtype(d[i].dtype);
    int64_t bytes = primc_dtype_size(d[i].dtype);
    for (int k = 0; k < d[i].rank; k++) bytes *= d[i].dims[k];
    if (!dt) return fclose(h), free(hdr), fprintf(stderr, "error: %s: no safetensors dtype\n", d[i].name), 1;
    if (i) fputc(',', h);
    json_string(h, d[i].name);
    fprintf(h, ":{\"dtype\":\"%s\",\"shape\":[", dt);
    for (int k = 0; k < d[i].rank; k++) fprintf(h, "%s%lld", k ? "," : "", (long long)d[i].dims[k]);
    fprintf(h, "],\"data_offsets\":[%lld,%lld]}", (long long)at, (long long)(at + bytes));
    at += bytes;
  }
  fputc('}', h);
  while ((ftell(h) & 7) != 0) fputc(' ', h);
  if (fclose(h) != 0) return free(hdr), fprintf(stderr, "error: out of memory\n"), 1;
  FILE *f = fopen(path, "wb");
  if (!f) return free(hdr), fprintf(stderr, "error: cannot write %s\n", path), 1;
  unsigned char len[8];
  for (int k = 0; k < 8; k++) len[k] = (unsigned char)((uint64_t)hlen >> (8 * k));
  int bad = fwrite(len, 1, 8, f) != 8 || fwrite(hdr, 1, hlen, f) != hlen;
  for (int i = 0; i < n && !bad; i++) {
    size_t bytes = primc_dtype_size(d[i].dtype);
    for (int k = 0; k < d[i].rank; k++) bytes *= (size_t)d[i].dims[k];
    bad = fwrite(data[i], 1, bytes, f) != bytes;
  }
  bad |= fclose(f) != 0;
  free(hdr);
  if (bad) return fprintf(stderr, "error: cannot write %s\n", path), 1;
  return 0;
}

static int64_t row_bytes(const primc_tensor_desc *d) {
  int64_t b = primc_dtype_size(d->dtype);
  for (int k = 1; k < d->rank; k++) b *= d->dims[k];
  return b;
}

static void put_dims(char *buf, size_t n, const int64_t *dims, int from, int rank) {
  size_t k = (size_t)snprintf(buf, n, "[");
  for (int i = from; i < rank && k < n; i++) k += (size_t)snprintf(buf + k, n - k, "%s%lld", i > from ? ", " : "", (long long)dims[i]);
  if (k < n) snprintf(buf + k, n - k, "]");
}

/* dataset i: rows of input i's shape without its first dim */
static int check_dataset(const primc_tensor_desc *d, const primc_array *a, const char *path) {
  int ok = d->rank >= 1 && a->rank == d->rank && (int)a->dtype == (int)d->dtype && a->dims[0] >= 1;
  for (int k = 1; ok && k < d->rank; k++) ok = a->dims[k] == d->dims[k];
  if (ok) return 0;
  char want[160], got[160];
  put_dims(want, sizeof want, d->dims, 1, d->rank);
  put_dims(got, sizeof got, a->dims, 0, a->rank);
  fprintf(stderr, "error: %s: a dataset for input %s holds rows of its shape without the batch dim, %s (dtype code %d, "
          "one or more rows); the file holds %s (dtype code %d)\n", path, d->name, want, (int)d->dtype, got, (int)a->dtype);
  return 1;
}

static size_t array_bytes(const primc_array *a) { return (size_t)primc_array_numel(a) * primc_dtype_size(a->dtype); }
static size_t padded_bytes(const primc_array *a) { return (array_bytes(a) + 63) / 64 * 64; }

/* the n state arrays of descs d in one zeroed allocation, each 64-byte aligned (one run of 2 MB pages, not a
 * partly used last page per array); the allocation is a[0].data */
static int state_set(const primc_tensor_desc *d, int n, primc_array *a) {
  size_t total = 0;
  for (int i = 0; i < n; i++) {
    a[i].dtype = (primc_dtype)d[i].dtype;
    a[i].rank = d[i].rank;
    memcpy(a[i].dims, d[i].dims, sizeof a[i].dims);
    total += padded_bytes(&a[i]);
  }
  char *p = primc_driver_big_alloc(total);
  if (!p) return fprintf(stderr, "error: out of memory\n"), 1;
  memset(p, 0, total);
  for (int i = 0; i < n; p += padded_bytes(&a[i]), i++) a[i].data = p;
  return 0;
}

/* --batch B: the inputs' dims (rows, dims[i] pointing at row i) with each dataset input's first dim B, which must be
 * a run-time dim whose range holds B; 1 after saying why not (what: the batch, named for the message; hint: a
 * last line, or "") */
static int batch_dims(const primc_model_desc *m, int n_data, int64_t batch, int64_t (*rows)[PRIMC_MAX_RANK],
                      const int64_t **dims, const char *what, const char *hint) {
  for (int i = 0; i < m->n_inputs; i++) {
    memcpy(rows[i], m->inputs[i].dims, sizeof rows[i]);
    dims[i] = rows[i];
    if (i >= n_data) continue;
    if (!m->dims || !m->dims->input_syms || m->inputs[i].rank < 1 || m->dims->input_syms[i * PRIMC_MAX_RANK] < 0)
      return fprintf(stderr, "error: %s: %s was compiled for batch %lld of input %s (compile the step with its batch "
                     "a range, --dim NAME=LO..HI, to take others)%s\n", what, m->name,
                     (long long)(m->inputs[i].rank ? m->inputs[i].dims[0] : 1), m->inputs[i].name, hint), 1;
    rows[i][0] = batch;
  }
  int64_t values[PRIMC_MAX_RANK * 4];
  char msg[512];
  if (primc_dims_check(m->dims, dims, values, msg, sizeof msg) != PRIMC_OK)
    return fprintf(stderr, "error: %s: %s%s\n", what, msg, hint), 1;
  return 0;
}

/* which rows each step takes: with --epochs, passes over the datasets' rows in batches of b, each ending with the
 * rest rows left over (0: none, or dropped); else batches of b one after another, wrapping */
typedef struct schedule {
  int64_t b, rows, rest, used; /* used: the rows an epoch trains on */
  int64_t per_epoch; /* steps per epoch; 0: no epochs */
} schedule;

static void batch_of(const schedule *sc, int64_t step, int64_t *start, int64_t *size) {
  if (!sc->per_epoch) {
    *start = step * sc->b, *size = sc->b;
    return;
  }
  int64_t k = step % sc->per_epoch;
  *start = k * sc->b;
  *size = sc->rest && k == sc->per_epoch - 1 ? sc->rest : sc->b;
}

/* --epochs: the datasets' rows (the same in each) and the schedule, the left-over batch's dims in rows/dims when it
 * runs (a step compiled for one batch cannot: said, with what to do); 1 after saying why not */
static int epoch_schedule(const primc_model_desc *m, int n_data, const primc_array *data, const primc_train_opts *t,
                          schedule *sc, int64_t (*rows)[PRIMC_MAX_RANK], const int64_t **dims) {
  sc->rows = data[0].dims[0];
  for (int i = 1; i < n_data; i++)
    if (data[i].dims[0] != sc->rows)
      return fprintf(stderr, "error: --epochs: the datasets hold %lld rows for input %s and %lld for input %s\n",
                     (long long)sc->rows, m->inputs[0].name, (long long)data[i].dims[0], m->inputs[i].name), 1;
  int64_t full = sc->rows / sc->b;
  sc->rest = t->drop_last ? 0 : sc->rows % sc->b;
  sc->per_epoch = full + (sc->rest > 0);
  sc->used = full * sc->b + sc->rest;
  if (sc->per_epoch == 0)
    return fprintf(stderr, "error: --epochs with --drop-last: the datasets' %lld rows make no batch of %lld\n",
                   (long long)sc->rows, (long long)sc->b), 1;
  char what[160];
  snprintf(what, sizeof what, "--epochs: each epoch of %lld rows in batches of %lld ends with one of %lld",
           (long long)sc->rows, (long long)sc->b, (long long)sc->rest);
  if (sc->rest && batch_dims(m, n_data, sc->rest, rows, dims, what, " (or give --drop-last to skip it)")) return 1;
  if (t->epochs > INT64_MAX / sc->per_epoch) return fprintf(stderr, "error: --epochs %lld: too many steps\n", (long long)t->epochs), 1;
  return 0;
}

int primc_train_main(const primc_model_desc *m, const primc_driver_opts *o, const primc_train_opts *t) {
  const primc_state_desc *s = m->state;
  int n_data = m->n_inputs - s->n, n = s->n, rc = 1;
  primc_array *data = calloc(2 * (size_t)m->n_inputs + 1, sizeof *data), *outs = calloc((size_t)m->n_outputs + 1, sizeof *outs);
  primc_array *st[2] = {calloc((size_t)n + 1, sizeof *st[0]), calloc((size_t)n + 1, sizeof *st[1])};
  const void **in = calloc((size_t)m->n_inputs + 1, sizeof *in);
  void **out = calloc((size_t)m->n_outputs + 1, sizeof *out), **saved = calloc((size_t)n + 1, sizeof *saved);
  void *ws = primc_driver_big_alloc((size_t)m->workspace_size);
  if (!data || !outs || !st[0] || !st[1] || !in || !out || !saved || !ws) {
    fprintf(stderr, "error: out of memory\n");
    goto done;
  }
  if (o->random) {
    if (primc_driver_inputs(m->inputs, n_data, NULL, o->seed, data, NULL)) goto done;
  } else {
    for (int i = 0; i < n_data; i++) {
      char err[256];
      if (primc_npy_read(o->ins[i], &data[i], err, sizeof err) != 0) {
        fprintf(stderr, "error: %s: %s\n", o->ins[i], err);
        goto done;
      }
      if (check_dataset(&m->inputs[i], &data[i], o->ins[i])) goto done;
    }
  }
  primc_array *batch = data + n_data; /* n_data batch buffers after the datasets */
  for (int i = 0; i < n_data; i++) {
    if (primc_driver_alloc(&m->inputs[i], &batch[i])) goto done;
    in[i] = batch[i].data;
  }
  if (state_set(m->inputs + n_data, n, st[0]) || (!s->in_place && state_set(m->inputs + n_data, n, st[1]))) goto done;
  size_t *init_bytes = calloc((size_t)n + 1, sizeof *init_bytes);
  if (!init_bytes) {
    fprintf(stderr, "error: out of memory\n");
    goto done;
  }
  for (int i = 0; i < n; i++) {
    if (!s->init[i]) continue;
    init_bytes[i] = array_bytes(&st[0][i]);
    memcpy(st[0][i].data, s->init[i], init_bytes[i]);
  }
  primc_driver_drop_file_pages(s->init, init_bytes, n); /* copied out: the executable's pages go back */
  free(init_bytes);
  for (int i = 0; i < m->n_outputs - n; i++) {
    if (primc_driver_alloc(&m->outputs[i], &outs[i])) goto done;
    out[i] = outs[i].data;
  }
  if (s->in_place) /* one set: each step writes the next state over the one it read */
    for (int i = 0; i < n; i++) st[1][i] = st[0][i];
  /* --batch B: the run's dims, checked once here */
  int64_t(*bd)[PRIMC_MAX_RANK] = t->batch > 0 ? calloc((size_t)m->n_inputs + 1, sizeof *bd) : NULL;
  const int64_t **bdims = t->batch > 0 ? calloc((size_t)m->n_inputs + 1, sizeof *bdims) : NULL;
  /* --epochs: the batch of the rows left over, its dims */
  int64_t(*rd)[PRIMC_MAX_RANK] = t->epochs ? calloc((size_t)m->n_inputs + 1, sizeof *rd) : NULL;
  const int64_t **rdims = t->epochs ? calloc((size_t)m->n_inputs + 1, sizeof *rdims) : NULL;
  if ((t->batch > 0 && (!bd || !bdims)) || (t->epochs && (!rd || !rdims))) {
    fprintf(stderr, "error: out of memory\n");
    goto batch_done;
  }
  char what[64];
  snprintf(what, sizeof what, "--batch %lld", (long long)t->batch);
  if (bd && batch_dims(m, n_data, t->batch, bd, bdims, what, "")) goto batch_done;
  schedule sc = {bd ? t->batch : m->inputs[0].rank ? m->inputs[0].dims[0] : 1, 0, 0, 0, 0};
  if (t->epochs && epoch_schedule(m, n_data, data, t, &sc, rd, rdims)) goto batch_done;
  int64_t steps = t->epochs ? t->epochs * sc.per_epoch : t->steps;
  /* --shuffle: the rows' order, drawn anew for each epoch */
  int64_t *order = t->epochs && t->shuffle >= 0 ? malloc(sizeof *order * (size_t)sc.rows) : NULL;
  primc_mt19937 *rng = order ? malloc(sizeof *rng) : NULL;
  if (order && rng) primc_mt19937_seed(rng, (uint32_t)t->shuffle);
  if (t->epochs && t->shuffle >= 0 && (!order || !rng)) {
    free(order), free(rng);
    fprintf(stderr, "error: out of memory\n");
    goto batch_done;
  }
  int cur = 0;
  double epoch_loss = 0;
  /* each step's time: the first pays for the workspace's pages, touched for the first time */
  double *step_ms = steps > 0 && steps <= ((int64_t)1 << 24) ? malloc((size_t)steps * sizeof *step_ms) : NULL;
  double t0 = primc_now_ms(), ts = t0;
  for (int64_t step = 0; step < steps; step++) {
    int64_t start, size;
    batch_of(&sc, step, &start, &size);
    if (order && step % sc.per_epoch == 0) { /* an epoch begins: numpy's permutation(rows) */
      for (int64_t r = 0; r < sc.rows; r++) order[r] = r;
      primc_mt19937_shuffle(rng, order, sc.rows);
    }
    for (int i = 0; i < n_data; i++) { /* rows start .. start + size - 1 of the dataset (or of its order), wrapping */
      const primc_tensor_desc *d = &m->inputs[i];
      int64_t rb = row_bytes(d), rows = data[i].dims[0];
      for (int64_t j = 0; j < size; j++) {
        int64_t r = order ? order[start + j] : (start + j) % rows;
        memcpy((char *)batch[i].data + j * rb, (const char *)data[i].data + r * rb, (size_t)rb);
      }
    }
    for (int i = 0; i < n; i++) in[n_data + i] = st[cur][i].data, out[m->n_outputs - n + i] = st[!cur][i].data;
    const int64_t *const *dims = size != sc.b ? rdims : bdims;
    int r = dims ? m->run_dims(in, dims, out, ws) : m->run(in, out, ws);
    if (r != 0) {
      fprintf(stderr, "error: %s_run returned %d at step %lld\n", m->name, r, (long long)step);
      free(step_ms), free(order), free(rng);
      goto batch_done;
    }
    cur = !cur;
    if (step_ms) {
      double now = primc_now_ms();
      step_ms[step] = now - ts;
      ts = now;
    }
    double loss = m->outputs[0].dtype == PRIMC_F64 ? *(const double *)out[0] : *(const float *)out[0];
    if (t->log_every > 0 && ((step + 1) % t->log_every == 0 || step + 1 == steps))
      printf("step %lld loss %.7g\n", (long long)(step + 1), loss);
    epoch_loss += loss * (double)size; /* the loss is the batch's mean: the epoch's, over its rows */
    if (sc.per_epoch && (step + 1) % sc.per_epoch == 0) {
      printf("epoch %lld loss %.7g (%lld batch%s, %lld rows)\n", (long long)((step + 1) / sc.per_epoch),
             epoch_loss / (double)sc.used, (long long)sc.per_epoch, sc.per_epoch > 1 ? "es" : "", (long long)sc.used);
      epoch_loss = 0;
    }
  }
  double ms = (primc_now_ms() - t0) / (double)steps;
  printf("%lld steps, %.3f ms per step", (long long)steps, ms);
  if (step_ms) {
    double first = step_ms[0];
    primc_sort_ms(step_ms, (int)steps); /* steps <= 2^24 when step_ms is kept */
    printf(", median %.3f, first %.3f", step_ms[steps / 2], first);
  }
  printf(" (batches cut from the datasets included)\n");
  free(step_ms), free(order), free(rng);
  if (t->profile) primc_driver_profile_print(m, (int)steps, ms, NULL, 0);
  for (int i = 0; i < n; i++) saved[i] = st[cur][i].data;
  if (t->save && save_safetensors(t->save, m->inputs + n_data, saved, s->n_weights)) goto batch_done;
  if (o->out_dir) { /* the last step's loss and model outputs (at the dims it ran), then the state it left */
    for (int i = 0; (bd || rd) && i < m->n_outputs - n; i++)
      if (m->output_dims(ws, i, outs[i].dims) != 0) {
        fprintf(stderr, "error: %s_output_dims failed\n", m->name);
        goto batch_done;
      }
    for (int i = 0; i < n; i++) outs[m->n_outputs - n + i] = st[cur][i];
    rc = primc_driver_write(o->out_dir, outs, m->n_outputs);
    for (int i = 0; i < n; i++) outs[m->n_outputs - n + i].data = NULL;
    if (rc) goto batch_done;
  }
  rc = 0;
batch_done:
  free(bd), free(bdims), free(rd), free(rdims);
done:
  for (int i = 0; data && i < 2 * n_data; i++) free(data[i].data);
  for (int i = 0; outs && i < m->n_outputs; i++) free(outs[i].data);
  for (int k = 0; k < (s->in_place ? 1 : 2); k++)
    if (st[k] && n) free(st[k][0].data);
  free(data), free(outs), free(st[0]), free(st[1]), free(in), free(out), free(saved), free(ws);
  return rc;
}
