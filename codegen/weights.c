/* codegen/weights.c: the weights blob, constants at their offsets (packed where kir_pack_weights says), built
 * whole for LLVM IR and assembly, or streamed one constant at a time into a file so that compiling never holds
 * a second copy of a large model's weights (issue 26). */
#include "codegen/kir.h"
#include "runtime/primc_rt.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* kir_pack_weights' entry for buffer i, NULL when it is stored as it is */
static const kir_packed *packed_of(const kir_program *p, int i) {
  for (int j = 0; j < p->n_packed; j++)
    if (p->packed[j].buf == i) return &p->packed[j];
  return NULL;
}

/* buffer i's bytes (b->nbytes) packed from its constant d into dst; PRIMC_OK or a runtime status */
static int pack_into(const kir_program *p, const kir_packed *pk, const void *d, char *dst) {
  if (pk->groups) { /* a conv's weights, as its plan's layout wants (runtime/conv/rows.c) */
    primc_conv2d cv;
    if (!primc_conv2d_of_params(pk->conv, &cv)) return PRIMC_ERR_ARG;
    const int64_t *q = pk->conv + CONV_EPI_AT;
    primc_conv_plan plan = {(int32_t)(q[CONV_EPI_ROW] - 1), (int32_t)q[CONV_EPI_ROW - 3], pk->a_mr};
    return primc_conv_plan_pack(&cv, &plan, d, dst);
  }
  if (pk->i8 == 2) return primc_conv_i8_pack(pk->conv, d, dst, pk->i8_prep - 1);
  if (pk->i8) return primc_igemm_pack_b_row(pk->trans, pk->n, pk->k, d, dst, pk->i8_prep - 1);
  if (pk->int_chunks) return primc_bgemm_pack_b_int(pk->trans, pk->n, pk->k, d, pk->int_chunks, dst);
  if (pk->bf16_split) return primc_bgemm_pack_b(pk->trans, pk->n, pk->k, d, pk->trans ? pk->k : pk->n, pk->bf16_split, dst);
  return primc_sgemm_pack_b_isa(kir_gemm_isa(p), pk->trans, pk->n, pk->k, d, pk->trans ? pk->k : pk->n, dst);
}

static const void *const_data(const kir_buf *b) {
  return b->place == KP_CONST && b->v && b->nbytes ? pc_const_data(b->v) : NULL;
}

void *kir_weights_blob(const kir_program *p) {
  size_t size = ((size_t)p->weights_size + 64) / 64 * 64; /* 64-aligned: packed panels need it */
  char *blob = aligned_alloc(64, size);
  if (!blob) return NULL;
  memset(blob, 0, size);
  for (int i = 0; i < p->n_bufs; i++) {
    const kir_buf *b = &p->bufs[i];
    const void *d = const_data(b);
    const kir_packed *pk = packed_of(p, i);
    if (d && pk && pack_into(p, pk, d, blob + b->offset) != PRIMC_OK) {
      free(blob);
      return NULL;
    } else if (d && !pk) {
      memcpy(blob + b->offset, d, (size_t)b->nbytes);
    }
  }
  return blob;
}

int kir_pwrite_all(int fd, const void *data, size_t n, off_t at) {
  const char *c = data;
  while (n) {
    ssize_t w = pwrite(fd, c, n, at);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return 0;
    c += w, n -= (size_t)w, at += w;
  }
  return 1;
}

int kir_pread_all(int fd, void *data, size_t n, off_t at) {
  char *c = data;
  while (n) {
    ssize_t r = pread(fd, c, n, at);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return 0;
    c += r, n -= (size_t)r, at += r;
  }
  return 1;
}

int kir_pread_chunks(int fd, off_t at, int64_t n, int (*fn)(void *ctx, const void *chunk, size_t len, int64_t off),
                     void *ctx) {
  enum { CHUNK = 1 << 20 };
  char *buf = n > 0 ? malloc(CHUNK) : NULL;
  int ok = n <= 0 || buf;
  for (int64_t done = 0; ok && done < n;) {
    size_t want = n - done < CHUNK ? (size_t)(n - done) : CHUNK;
    ok = kir_pread_all(fd, buf, want, at + (off_t)done) && fn(ctx, buf, want, done);
    done += (int64_t)want;
  }
  free(buf);
  return ok;
}

pc_status kir_weights_each(const kir_program *p, kir_weight_fn fn, void *ctx) {
  pc_graph *g = p->g;
  for (int i = 0; i < p->n_bufs; i++) {
    const kir_buf *b = &p->bufs[i];
    const void *d = const_data(b);
    if (!d) continue;
    const kir_packed *pk = packed_of(p, i);
    /* a packed weight goes through a buffer of its own size, freed before the next one */
    char *tmp = pk ? aligned_alloc(64, ((size_t)b->nbytes + 63) / 64 * 64) : NULL;
    if (pk && !tmp) return pc_fail(g, PC_ERR_NOMEM, "out of memory packing a weight of %lld bytes", (long long)b->nbytes);
    if (pk && pack_into(p, pk, d, tmp) != PRIMC_OK) {
      free(tmp);
      return pc_fail(g, PC_ERR_INTERNAL, "packing a weight of %lld bytes failed", (long long)b->nbytes);
    }
    pc_status s = fn(ctx, i, pk ? tmp : d, b->nbytes);
    free(tmp);
    if (s != PC_OK) return s;
  }
  return PC_OK;
}

typedef struct at_fd {
  const kir_program *p;
  int fd;
  int64_t base;
} at_fd;

static pc_status write_one(void *ctx, int buf, const void *bytes, int64_t n) {
  at_fd *w = ctx;
  if (!kir_pwrite_all(w->fd, bytes, (size_t)n, (off_t)(w->base + w->p->bufs[buf].offset)))
    return pc_fail(w->p->g, PC_ERR_IO, "cannot write the weights: %s", strerror(errno));
  return PC_OK;
}

pc_status kir_weights_write(const kir_program *p, int fd, int64_t base) {
  at_fd w = {p, fd, base};
  pc_status s = kir_weights_each(p, write_one, &w);
  if (s != PC_OK) return s;
  /* the gaps between constants (alignment) and the end: zeros */
  if (ftruncate(fd, (off_t)(base + p->weights_size)) != 0)
    return pc_fail(p->g, PC_ERR_IO, "cannot write the weights: %s", strerror(errno));
  return PC_OK;
}

static int sum_chunk(void *ctx, const void *chunk, size_t len, int64_t off) {
  (void)off;
  primc_checksum_update(ctx, chunk, len);
  return 1;
}

/* the checksum of the payload just written at base, read back: the constants are written in buffer order, not
 * offset order, and the gaps between them are holes */
static int payload_checksum(int fd, int64_t base, int64_t size, uint64_t *sum) {
  primc_checksum_state c;
  primc_checksum_init(&c);
  int ok = kir_pread_chunks(fd, (off_t)base, size, sum_chunk, &c);
  *sum = primc_checksum_final(&c);
  return ok;
}

int kir_weights_file_open(pc_graph *g, const char *path) {
  int fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) pc_fail(g, PC_ERR_IO, "cannot write %s: %s", path, strerror(errno));
  return fd;
}

pc_status kir_weights_file_close(pc_graph *g, int fd, int64_t payload, pc_status s, const char *path) {
  uint64_t sum = 0;
  if (s == PC_OK && ftruncate(fd, (off_t)(sizeof(primc_weights_header) + (uint64_t)payload)) != 0)
    s = pc_fail(g, PC_ERR_IO, "cannot write %s: %s", path, strerror(errno));
  if (s == PC_OK && !payload_checksum(fd, (int64_t)sizeof(primc_weights_header), payload, &sum))
    s = pc_fail(g, PC_ERR_IO, "cannot read back %s: %s", path, strerror(errno));
  if (s == PC_OK) {
    primc_weights_header h;
    primc_weights_header_fill(&h, (uint64_t)payload, sum);
    if (!kir_pwrite_all(fd, &h, sizeof h, 0)) s = pc_fail(g, PC_ERR_IO, "cannot write %s: %s", path, strerror(errno));
  }
  if (close(fd) != 0 && s == PC_OK) s = pc_fail(g, PC_ERR_IO, "cannot write %s: %s", path, strerror(errno));
  return s;
}

pc_status kir_weights_write_file(const kir_program *p, const char *path) {
  int fd = kir_weights_file_open(p->g, path);
  if (fd < 0) return p->g->status;
  pc_status s = kir_weights_write(p, fd, (int64_t)sizeof(primc_weights_header));
  return kir_weights_file_close(p->g, fd, p->weights_size, s, path);
}
