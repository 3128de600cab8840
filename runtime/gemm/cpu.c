/* runtime/gemm/cpu.c: what this CPU runs: the instruction set primc_sgemm_isa() reports (detected once, forceable), its AMD family, its zmm FMA rate. */
#include "runtime/gemm/gemm.h"

#include <pthread.h>
#if PRIMC_X86
#include <cpuid.h>
#endif

static int always(void) { return 1; }

#if PRIMC_X86

static int has_avx2(void) {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
}

static int has_avx512(void) {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("fma");
}
#else
static int has_avx2(void) { return 0; }
static int has_avx512(void) { return 0; }
#endif

/* Advanced SIMD is part of every AArch64 CPU */
static int has_neon(void) { return PRIMC_ARM64; }

static const struct {
  const char *name;
  int (*supported)(void);
} isas[PRIMC_ISA_COUNT] = {
    [PRIMC_ISA_SCALAR] = {"scalar", always},
    [PRIMC_ISA_AVX2] = {"avx2", has_avx2},
    [PRIMC_ISA_AVX512] = {"avx512", has_avx512},
    [PRIMC_ISA_NEON] = {"neon", has_neon},
};

static int auto_isa = -1, forced_isa = -1;
static pthread_once_t isa_once = PTHREAD_ONCE_INIT;

static void isa_detect(void) {
  auto_isa = PRIMC_ISA_SCALAR;
  for (int i = 0; i < PRIMC_ISA_COUNT; i++)
    if (isas[i].supported()) auto_isa = i;
}

int primc_sgemm_isa(void) {
  pthread_once(&isa_once, isa_detect);
  int f = __atomic_load_n(&forced_isa, __ATOMIC_RELAXED);
  return f >= 0 ? f : auto_isa;
}

int primc_sgemm_force_isa(int isa) {
  if (isa == PRIMC_ISA_AUTO) {
    __atomic_store_n(&forced_isa, -1, __ATOMIC_RELAXED);
    return 0;
  }
  if (isa < 0 || isa >= PRIMC_ISA_COUNT || !isas[isa].supported()) return -1;
  __atomic_store_n(&forced_isa, isa, __ATOMIC_RELAXED);
  return 0;
}

const char *primc_sgemm_isa_name(int isa) { return isa >= 0 && isa < PRIMC_ISA_COUNT ? isas[isa].name : "?"; }

/* read once: CPUID in a VM traps to the hypervisor, microseconds a call */
static int amd_fam;
static pthread_once_t fam_once = PTHREAD_ONCE_INIT;
static void fam_detect(void) {
#if PRIMC_X86
  unsigned a, b, c, d;
  if (!__get_cpuid(0, &a, &b, &c, &d) || b != 0x68747541u || d != 0x69746e65u || c != 0x444d4163u) return;
  if (!__get_cpuid(1, &a, &b, &c, &d)) return;
  unsigned base = (a >> 8) & 0xf;
  amd_fam = (int)(base == 0xf ? base + ((a >> 20) & 0xff) : base);
#endif
}
int primc_gm_amd_family(void) {
  pthread_once(&fam_once, fam_detect);
  return amd_fam;
}

/* AMD family 19h with AVX-512 is Zen 4, whose FMA pipes are 256 bits wide: a zmm FMA takes both */
static int cpu_splits_zmm(void) { return primc_gm_amd_family() == 0x19; }

static int zmm_fmas;
static pthread_once_t zmm_once = PTHREAD_ONCE_INIT;
static void zmm_detect(void) { zmm_fmas = !has_avx512() ? 0 : cpu_splits_zmm() ? 1 : 2; }

/* read once: CPUID in a VM traps to the hypervisor, microseconds a call */
int primc_cpu_zmm_fmas(void) {
  pthread_once(&zmm_once, zmm_detect);
  return zmm_fmas;
}

/* F16C from CPUID leaf 1 (clang 14's __builtin_cpu_supports does not know "f16c") */
static int f16c;
static pthread_once_t f16c_once = PTHREAD_ONCE_INIT;
static void f16c_detect(void) {
#if PRIMC_X86
  unsigned a, b, c, d;
  f16c = __get_cpuid(1, &a, &b, &c, &d) && (c >> 29 & 1) && has_avx2();
#endif
}
int primc_cpu_f16c(void) {
  pthread_once(&f16c_once, f16c_detect);
  return f16c;
}
