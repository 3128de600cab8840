/* runtime/weights.c: the weights side file: its header (magic, version, payload size, checksum), written by codegen and checked when mapped. */
#include "runtime/primc_rt.h"
#include "runtime/primc_file.h"

#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* ---------------------------------------------------------------- checksum */

/*
 * Four independent 64-bit lanes take the payload's 8-byte words in turn (word i to lane i % 4):
 * lane = rotl((lane ^ word) * ODD, 29). Both steps are bijections of the lane, so any change confined
 * to one word always changes the result; the lanes are independent chains, so the loop runs at about
 * one 32-byte block per multiply latency, far faster than the page faults of a mapping. The end folds
 * the lanes in one after another through the same bijective step, then the length.
 */
#define CK_ODD 0x9e3779b97f4a7c15ull /* odd: multiplying by it is a bijection mod 2^64 */
#define CK_FOLD 0xd6e8feb86659fd93ull

static uint64_t rotl64(uint64_t x, int r) { return (x << r) | (x >> (64 - r)); }

static uint64_t ck_step(uint64_t lane, uint64_t word) { return rotl64((lane ^ word) * CK_ODD, 29); }

static uint64_t load64(const unsigned char *p) {
  uint64_t w;
  memcpy(&w, p, 8);
  return w;
}

void primc_checksum_init(primc_checksum_state *c) {
  memset(c, 0, sizeof *c);
  for (int i = 0; i < 4; i++) c->lane[i] = CK_FOLD * (uint64_t)(i + 1);
}

static void ck_blocks(primc_checksum_state *c, const unsigned char *p, size_t blocks) {
  uint64_t l0 = c->lane[0], l1 = c->lane[1], l2 = c->lane[2], l3 = c->lane[3];
  for (size_t b = 0; b < blocks; b++, p += 32) {
    l0 = ck_step(l0, load64(p));
    l1 = ck_step(l1, load64(p + 8));
    l2 = ck_step(l2, load64(p + 16));
    l3 = ck_step(l3, load64(p + 24));
  }
  c->lane[0] = l0, c->lane[1] = l1, c->lane[2] = l2, c->lane[3] = l3;
}

void primc_checksum_update(primc_checksum_state *c, const void *data, size_t n) {
  const unsigned char *p = data;
  c->total += n;
  if (c->n_tail) { /* complete the block a previous chunk left open */
    size_t take = 32 - c->n_tail < n ? 32 - c->n_tail : n;
    memcpy(c->tail + c->n_tail, p, take);
    c->n_tail += (uint32_t)take, p += take, n -= take;
    if (c->n_tail < 32) return;
    ck_blocks(c, c->tail, 1);
    c->n_tail = 0;
  }
  ck_blocks(c, p, n / 32);
  p += n / 32 * 32;
  memcpy(c->tail, p, n % 32);
  c->n_tail = (uint32_t)(n % 32);
}

uint64_t primc_checksum_final(const primc_checksum_state *c) {
  primc_checksum_state t = *c;
  if (t.n_tail) { /* the last partial block, zero-filled (the length below tells the fill from zeros) */
    memset(t.tail + t.n_tail, 0, 32 - t.n_tail);
    ck_blocks(&t, t.tail, 1);
  }
  uint64_t h = CK_FOLD;
  for (int i = 0; i < 4; i++) h = ck_step(h, t.lane[i]);
  h = ck_step(h, t.total);
  return h ^ (h >> 31);
}

uint64_t primc_checksum(const void *data, size_t n) {
  primc_checksum_state c;
  primc_checksum_init(&c);
  primc_checksum_update(&c, data, n);
  return primc_checksum_final(&c);
}

/* ---------------------------------------------------------------- header */

/* the header's own checksum covers every byte before it */
static uint64_t header_sum(const primc_weights_header *h) {
  return primc_checksum(h, offsetof(primc_weights_header, header_checksum));
}

void primc_weights_header_fill(primc_weights_header *h, uint64_t payload_size, uint64_t payload_checksum) {
  memset(h, 0, sizeof *h);
  memcpy(h->magic, PRIMC_WEIGHTS_MAGIC, sizeof h->magic);
  h->version = PRIMC_WEIGHTS_VERSION;
  h->header_size = (uint32_t)sizeof *h;
  h->payload_size = payload_size;
  h->payload_checksum = payload_checksum;
  h->header_checksum = header_sum(h);
}

static int fail(char *err, size_t errlen, const char *msg) {
  if (err && errlen) snprintf(err, errlen, "%s", msg);
  return PRIMC_ERR_WEIGHTS;
}

int primc_weights_check(const void *file, size_t file_size, int64_t payload_size, char *err, size_t errlen) {
  primc_weights_header h;
  if (!file || file_size < sizeof h) return fail(err, errlen, "shorter than the weights file header");
  memcpy(&h, file, sizeof h);
  if (memcmp(h.magic, PRIMC_WEIGHTS_MAGIC, sizeof h.magic))
    return fail(err, errlen, "not a primc weights file (bad magic)");
  if (h.version != PRIMC_WEIGHTS_VERSION || h.header_size != sizeof h)
    return fail(err, errlen, "weights file format version or header size not this runtime's");
  if (h.header_checksum != header_sum(&h)) return fail(err, errlen, "weights file header checksum mismatch");
  if (h.payload_size != file_size - sizeof h)
    return fail(err, errlen, "weights file size differs from the size its header records (truncated?)");
  if (payload_size >= 0 && h.payload_size != (uint64_t)payload_size)
    return fail(err, errlen, "weights file holds a different number of bytes than this model's weights "
                             "(another model's or another build's?)");
  if (h.payload_checksum != primc_checksum((const char *)file + sizeof h, (size_t)h.payload_size))
    return fail(err, errlen, "weights file payload checksum mismatch (corrupt)");
  return PRIMC_OK;
}

int primc_weights_map_err(const char *path, int64_t size, void **base, char *err, size_t errlen) {
  if (!path || !base) return fail(err, errlen, "no weights path given"), PRIMC_ERR_ARG;
  long long file_size = 0;
  int fd = primc_file_open_fd(path, &file_size, err, errlen); /* refuses FIFOs, directories, devices */
  if (fd < 0) return PRIMC_ERR_WEIGHTS;
  size_t want = sizeof(primc_weights_header) + (size_t)(size > 0 ? size : 0);
  if (size < 0 && file_size >= (long long)sizeof(primc_weights_header)) want = (size_t)file_size; /* any size */
  if (file_size != (long long)want) {
    close(fd);
    if (err && errlen)
      snprintf(err, errlen, "%s: %lld bytes, this model's weights file has %zu (header included)", path, file_size, want);
    return PRIMC_ERR_WEIGHTS;
  }
  void *p = mmap(NULL, want, PROT_READ, MAP_PRIVATE, fd, 0);
  close(fd);
  if (p == MAP_FAILED) return fail(err, errlen, "cannot map the weights file");
  char why[256];
  if (primc_weights_check(p, want, size, why, sizeof why) != PRIMC_OK) {
    munmap(p, want);
    if (err && errlen) snprintf(err, errlen, "%s: %s", path, why);
    return PRIMC_ERR_WEIGHTS;
  }
  *base = (char *)p + sizeof(primc_weights_header); /* 64 bytes in: the payload keeps its 64-byte alignment */
  return PRIMC_OK;
}

int primc_weights_map(const char *path, int64_t size, void **base) {
  return primc_weights_map_err(path, size, base, NULL, 0);
}
