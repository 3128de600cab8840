/* codegen/backend.c: pc_codegen: the backend table (which renderer and packager an output takes) and the kernel dump. */
#include "codegen/codegen.h"
#include "codegen/kir.h"

static int is_cuda_c(const pc_codegen_opts *o) { return o->emit == PC_EMIT_CUDA; }
static int is_cuda(const pc_codegen_opts *o) { return o->target == PC_TARGET_CUDA; }
static int is_cpu(const pc_codegen_opts *o) { return o->target == PC_TARGET_CPU; }

/* First row that accepts the options wins. The CPU row serves the host and cross targets (--triple):
 * pc_codegen_cpu leaves out what only the host may do (weight packing for its GEMM, pool calls). */
static const struct pc_backend {
  const char *name;
  int (*accepts)(const pc_codegen_opts *o);
  pc_status (*emit)(pc_graph *g, const pc_codegen_opts *o);
} backends[] = {
    {"cuda-c", is_cuda_c, pc_codegen_cuda},       /* --emit cuda: CUDA C text, or its cubin / PTX (codegen/cuda.c) */
    {"cuda", is_cuda, pc_codegen_cuda_package},   /* --target cuda: NVRTC binaries with a host side (codegen/package_cuda.c) */
    {"cpu", is_cpu, pc_codegen_cpu},              /* LLVM objects, executables, libraries (codegen/package.c) */
};

pc_status pc_codegen_host_only_check(pc_graph *g, const char *target) {
  if (g->matmul_precision == PC_MATMUL_HIGHEST && g->autocast != PC_AUTOCAST_BF16) return PC_OK;
  int cast = g->autocast == PC_AUTOCAST_BF16; /* the option that asked for bf16 */
  return pc_fail(g, PC_ERR_UNSUPPORTED, "%s %s: only host CPU and CUDA code have bf16 contractions (not %s)",
                 cast ? "autocast" : "matmul precision",
                 cast ? pc_autocast_name(g->autocast) : pc_matmul_precision_name(g->matmul_precision), target);
}

pc_status pc_codegen(pc_graph *g, const pc_codegen_opts *opts) {
  if (!opts || !opts->output) return pc_fail(g, PC_ERR_ATTR, "codegen: no output path");
  if (pc_output_check(g, opts) != PC_OK) return g->status;
  /* CUDA has its own bf16 and TF32 rows (codegen/cuda_gemm.c); a cross CPU target has none */
  if (opts->triple && is_cpu(opts) && !is_cuda_c(opts) &&
      pc_codegen_host_only_check(g, "a --triple target") != PC_OK)
    return g->status;
  for (size_t i = 0; i < sizeof backends / sizeof *backends; i++)
    if (backends[i].accepts(opts)) return backends[i].emit(g, opts);
  return pc_fail(g, PC_ERR_UNSUPPORTED, "codegen: no backend for target %d", (int)opts->target);
}

pc_status pc_kernels_print(pc_graph *g, FILE *f) { return pc_kernels_print_tuned(g, f, NULL); }

pc_status pc_kernels_print_tuned(pc_graph *g, FILE *f, struct pc_autotune *tune) {
  pc_codegen_opts o = {.autotune = tune};
  return pc_kernels_print_target(g, f, &o);
}

pc_status pc_kernels_print_target(pc_graph *g, FILE *f, const pc_codegen_opts *o) {
  kir_program p;
  pc_status s = kir_build_cpu(g, o, &p); /* the program a CPU compile with o builds */
  if (s == PC_OK) kir_print(&p, f);
  return s;
}

pc_status pc_kernels_print_cuda(pc_graph *g, FILE *f, int sm) {
  kir_program p;
  pc_status s = kir_build_cuda(g, &p, sm);
  if (s == PC_OK) kir_print(&p, f);
  return s;
}
