/* codegen/weights_pool.c: the weights of several programs (buckets) as one pool where each distinct constant is
 * stored once. Buckets planned at other sizes pick other conv rows for a few layers and pack those weights
 * otherwise; whole blobs then differ though most constants are the same bytes. The pool is written to a file as
 * it grows (the side file of --weights external, else an unlinked temporary one in $TMPDIR or /tmp), so a compile
 * never holds it. */
#include "codegen/kir.h"
#include "runtime/primc_rt.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

pc_status kir_pool_open(pc_graph *g, kir_pool *pl, int fd, int64_t base) {
  memset(pl, 0, sizeof *pl);
  pl->fd = fd, pl->base = base;
  if (fd >= 0) return PC_OK;
  const char *dir = getenv("TMPDIR") && *getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
  char path[4200];
  if (snprintf(path, sizeof path, "%s/primc-pool-XXXXXX", dir) >= (int)sizeof path)
    return pc_fail(g, PC_ERR_IO, "TMPDIR is longer than %d bytes", (int)sizeof path - 20);
  pl->fd = mkstemp(path);
  if (pl->fd < 0) return pc_fail(g, PC_ERR_IO, "cannot make a temporary file in '%s' (TMPDIR): %s", dir, strerror(errno));
  unlink(path); /* only the descriptor: nothing to remove on any exit */
  pl->own = 1;
  return PC_OK;
}

void kir_pool_close(kir_pool *pl) {
  if (pl->own && pl->fd >= 0) close(pl->fd);
  free(pl->e);
  memset(pl, 0, sizeof *pl);
  pl->fd = -1;
}

static uint64_t hash_bytes(const void *bytes, int64_t n) {
  primc_checksum_state c;
  primc_checksum_init(&c);
  primc_checksum_update(&c, bytes, (size_t)n);
  return primc_checksum_final(&c);
}

static int same_chunk(void *ctx, const void *chunk, size_t len, int64_t off) {
  return !memcmp(chunk, (const char *)ctx + off, len);
}

/* whether the pool holds bytes at off (read back a chunk at a time) */
static int same_bytes(const kir_pool *pl, int64_t off, const void *bytes, int64_t n) {
  return kir_pread_chunks(pl->fd, (off_t)(pl->base + off), n, same_chunk, (void *)bytes);
}

typedef struct adding {
  kir_pool *pl;
  kir_program *p;
  int64_t bytes, fresh, end;
} adding;

static pc_status add_one(void *ctx, int buf, const void *bytes, int64_t n) {
  adding *a = ctx;
  kir_pool *pl = a->pl;
  uint64_t h = hash_bytes(bytes, n);
  int64_t off = -1;
  for (int i = 0; i < pl->n && off < 0; i++)
    if (pl->e[i].hash == h && pl->e[i].n == n && same_bytes(pl, pl->e[i].off, bytes, n)) off = pl->e[i].off;
  if (off < 0) {
    if (pl->n == pl->cap) {
      int cap = pl->cap ? 2 * pl->cap : 256;
      kir_pool_entry *e = realloc(pl->e, sizeof *e * (size_t)cap);
      if (!e) return pc_fail(a->p->g, PC_ERR_NOMEM, "out of memory");
      pl->e = e, pl->cap = cap;
    }
    off = (pl->size + 63) / 64 * 64; /* packed panels are read 64-aligned */
    if (!kir_pwrite_all(pl->fd, bytes, (size_t)n, (off_t)(pl->base + off)))
      return pc_fail(a->p->g, PC_ERR_IO, "cannot write the weights: %s", strerror(errno));
    pl->e[pl->n++] = (kir_pool_entry){h, off, n};
    pl->size = off + n;
    a->fresh += n;
  }
  a->p->bufs[buf].offset = off;
  a->bytes += n;
  a->end = off + n > a->end ? off + n : a->end;
  return PC_OK;
}

pc_status kir_pool_add(kir_pool *pl, kir_program *p, int64_t *bytes, int64_t *fresh) {
  adding a = {pl, p, 0, 0, 0};
  pc_status s = kir_weights_each(p, add_one, &a);
  if (s == PC_OK) p->weights_size = a.end;
  *bytes = a.bytes, *fresh = a.fresh;
  return s;
}

typedef struct copying {
  int fd;
  off_t at;
} copying;

static int copy_chunk(void *ctx, const void *chunk, size_t len, int64_t off) {
  const copying *c = ctx;
  return kir_pwrite_all(c->fd, chunk, len, c->at + (off_t)off);
}

pc_status kir_pool_copy(void *ctx, int fd, off_t at) {
  const kir_pool *pl = ctx;
  copying c = {fd, at};
  return kir_pread_chunks(pl->fd, (off_t)pl->base, pl->size, copy_chunk, &c) ? PC_OK : PC_ERR_IO;
}
