/* tests/unit/test_fuzz_regress.c: replays the fuzz seeds and the inputs the fuzzers once crashed on through the harnesses themselves (npy, safetensors, text, weights, grad). */
#include "tests/test.h"

#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* each harness under its own name, so the replay runs exactly what the fuzzer ran */
#define LLVMFuzzerTestOneInput fuzz_npy_one
#include "tests/fuzz/fuzz_npy.c"
#undef LLVMFuzzerTestOneInput
#define LLVMFuzzerTestOneInput fuzz_safetensors_one
#include "tests/fuzz/fuzz_safetensors.c"
#undef LLVMFuzzerTestOneInput
#define LLVMFuzzerTestOneInput fuzz_text_one
#include "tests/fuzz/fuzz_text.c"
#undef LLVMFuzzerTestOneInput
#define LLVMFuzzerTestOneInput fuzz_weights_one
#include "tests/fuzz/fuzz_weights.c"
#undef LLVMFuzzerTestOneInput
#define LLVMFuzzerTestOneInput fuzz_grad_one
#include "tests/fuzz/fuzz_grad.c"
#undef LLVMFuzzerTestOneInput

/* every file of DIR through fn; the number replayed */
static int replay_dir(const char *dir, int (*fn)(const uint8_t *, size_t)) {
  char path[2048];
  DIR *d = opendir(dir);
  if (!d) return 0;
  int n = 0;
  struct dirent *e;
  while ((e = readdir(d))) {
    if (e->d_name[0] == '.') continue;
    snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
    FILE *f = fopen(path, "rb");
    if (!f) continue;
    uint8_t *buf = malloc(1 << 20);
    size_t len = buf ? fread(buf, 1, 1 << 20, f) : 0;
    fclose(f);
    if (buf) CHECK_MSG(fn(buf, len) == 0, "%s", path); /* a crash or a broken property traps instead */
    free(buf);
    n++;
  }
  closedir(d);
  return n;
}

/* the committed seeds (tests/fuzz/seeds/TARGET) and crashers (tests/data/fuzz/TARGET) of one target */
static void replay(const char *target, int (*fn)(const uint8_t *, size_t)) {
  char dir[1024];
  snprintf(dir, sizeof dir, "%s/tests/fuzz/seeds/%s", pc_test_srcdir(), target);
  int n = replay_dir(dir, fn);
  snprintf(dir, sizeof dir, "%s/tests/data/fuzz/%s", pc_test_srcdir(), target);
  n += replay_dir(dir, fn);
  CHECK_MSG(n > 0, "no inputs for %s", target);
}

PC_TEST(fuzz_regress_npy) {
  char dir[1024];
  snprintf(dir, sizeof dir, "%s/tests/data/fuzz/npy", pc_test_srcdir());
  int n = replay_dir(dir, fuzz_npy_one);
  snprintf(dir, sizeof dir, "%s/tests/data/prims/add_f32_scalar", pc_test_srcdir());
  n += replay_dir(dir, fuzz_npy_one);
  CHECK(n > 0);
}
PC_TEST(fuzz_regress_safetensors) { replay("safetensors", fuzz_safetensors_one); }
PC_TEST(fuzz_regress_text) {
  char dir[1024];
  snprintf(dir, sizeof dir, "%s/tests/data/fuzz/text", pc_test_srcdir());
  int n = replay_dir(dir, fuzz_text_one);
  snprintf(dir, sizeof dir, "%s/tests/ir", pc_test_srcdir());
  n += replay_dir(dir, fuzz_text_one);
  CHECK(n > 0);
}
PC_TEST(fuzz_regress_weights) { replay("weights", fuzz_weights_one); }
PC_TEST(fuzz_regress_grad) { replay("grad", fuzz_grad_one); }

