/* tests/fuzz/fuzz_weights.c: libFuzzer harness of the compiled artifact's weights loader: any weights file ends in a status from primc_weights_map / primc_weights_check, and any packed GEMM or conv weights reach the kernels only through their header checks; never a crash. */
#include "runtime/primc_rt.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/*
 * Input: a mode byte, then
 *   mode & 3 == 0: a whole weights file (header and payload), checked in memory and, when mode & 4,
 *                  mapped from a memfd through primc_weights_map (the path a compiled model takes);
 *   otherwise:     edits (2-byte offset, byte) to a valid file that holds, after its header, B packed
 *                  for a 70 x 24 GEMM and a grouped conv's W^T panels (the layouts codegen writes);
 *                  with mode & 8 the checksums are made right again after the edits, as a crafted file
 *                  would, so the kernels' own header checks are what stands between the bytes and a read.
 * A file that passes its checks is then given to the GEMM and the conv exactly as generated code gives
 * it, with the sizes codegen would pass.
 */
enum { GN = 70, GK = 24, GM = 3 };
static const primc_conv2d conv = {1, 8, 7, 7, 64, 3, 3, 2, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 1, 0, 0, 0, 0};

static unsigned char *valid;
static size_t valid_size, gemm_bytes, conv_bytes;

static void build_valid(void) {
  int64_t og = conv.o / conv.groups, kk = (conv.c / conv.groups) * conv.kh * conv.kw;
  gemm_bytes = (primc_sgemm_packed_b_size(GN, GK) + 63) / 64 * 64;
  conv_bytes = primc_conv2d_packed_weight_bytes(&conv, PRIMC_CONV_W_PANELS);
  size_t stride = conv_bytes / (size_t)conv.groups;
  valid_size = sizeof(primc_weights_header) + gemm_bytes + conv_bytes;
  valid = aligned_alloc(64, (valid_size + 63) / 64 * 64);
  memset(valid, 0, valid_size);
  unsigned char *payload = valid + sizeof(primc_weights_header);
  float *b = malloc(sizeof(float) * GN * GK), *w = malloc(sizeof(float) * (size_t)(conv.o * kk));
  for (int i = 0; i < GN * GK; i++) b[i] = (float)(i % 7) - 3.0f;
  for (int64_t i = 0; i < conv.o * kk; i++) w[i] = (float)(i % 5) - 2.0f;
  if (primc_sgemm_pack_b(0, GN, GK, b, GN, payload) != PRIMC_OK) __builtin_trap();
  for (int g = 0; g < conv.groups; g++)
    if (primc_sgemm_pack_b(1, og, kk, w + g * og * kk, kk, payload + gemm_bytes + (size_t)g * stride) != PRIMC_OK)
      __builtin_trap();
  primc_weights_header h;
  primc_weights_header_fill(&h, valid_size - sizeof h, primc_checksum(payload, valid_size - sizeof h));
  memcpy(valid, &h, sizeof h);
  free(b);
  free(w);
}

/* a payload that passed the file checks, run through the kernels as generated code runs it */
static void run_kernels(const unsigned char *payload, size_t n) {
  static float A[GM * GK], C[GM * GN], x[8 * 49], y[64 * 49], col[4096];
  if (n < gemm_bytes + conv_bytes) return;
  if (primc_sgemm_packed_check(payload, gemm_bytes, GN, GK, NULL) == PRIMC_OK &&
      primc_sgemm_prepacked_any(0, GM, GN, GK, 1.0f, A, GK, payload, 0.0f, C, GN, NULL, NULL) != PRIMC_OK)
    __builtin_trap(); /* a header that passed the check must run */
  const unsigned char *w = payload + gemm_bytes;
  if ((size_t)primc_conv2d_scratch_floats(&conv) > sizeof col / sizeof *col) __builtin_trap();
  if (primc_conv2d_check_weights(&conv, w, conv_bytes) == PRIMC_OK) {
    primc_conv_epi e = {.lo = -1e30f, .hi = 1e30f};
    if (primc_conv2d_f32_epi(&conv, x, (const float *)w, &e, y, NULL, col) != PRIMC_OK) __builtin_trap();
  }
}

static void map_through_file(const unsigned char *file, size_t n) {
  int fd = memfd_create("primc-fuzz-weights", 0);
  if (fd < 0) return;
  if (write(fd, file, n) == (ssize_t)n) {
    char path[64], err[512];
    snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    void *base = NULL;
    int64_t payload = n >= sizeof(primc_weights_header) ? (int64_t)(n - sizeof(primc_weights_header)) : 0;
    if (primc_weights_map_err(path, payload, &base, err, sizeof err) == PRIMC_OK) {
      run_kernels(base, (size_t)payload);
      munmap((char *)base - sizeof(primc_weights_header), n);
    }
  }
  close(fd);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (!valid) build_valid();
  if (size < 1 || size > (1 << 20)) return 0;
  int mode = data[0];
  unsigned char *file;
  size_t n;
  if ((mode & 3) == 0) {
    n = size - 1;
    file = aligned_alloc(64, (n + 64) / 64 * 64);
    memcpy(file, data + 1, n);
  } else {
    n = valid_size;
    file = aligned_alloc(64, (n + 63) / 64 * 64);
    memcpy(file, valid, n);
    for (size_t i = 1; i + 3 <= size; i += 3) file[(data[i] | data[i + 1] << 8) % n] = data[i + 2];
    if (mode & 8) { /* a crafted file: checksums that match the edits */
      primc_weights_header h;
      memcpy(&h, file, sizeof h);
      primc_weights_header_fill(&h, h.payload_size, primc_checksum(file + sizeof h, n - sizeof h));
      memcpy(file, &h, sizeof h);
    }
  }
  char err[256];
  if (primc_weights_check(file, n, -1, err, sizeof err) == PRIMC_OK) run_kernels(file + sizeof(primc_weights_header), n - sizeof(primc_weights_header));
  if (mode & 4) map_through_file(file, n);
  free(file);
  return 0;
}
