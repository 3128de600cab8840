/* tools/compile.c: `primc compile`: model -> passes -> codegen -> executable, object + header, library, LLVM IR or asm. */
#include "api/dyn_source.h"
#include "codegen/autotune.h"
#include "codegen/codegen.h"
#include "frontend/frontend.h"
#include "passes/passes.h"
#include "runtime/primc_rt.h"
#include "tools/cli.h"
#include "tools/cmds.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *compile_help =
    "usage: primc compile MODEL -o OUT [options]\n"
    "  Compiles MODEL (.onnx or text graph) ahead of time for the CPU through LLVM, or for NVIDIA GPUs.\n"
    "  --emit exe|obj|lib|llvm|asm|cuda  what to write (default exe: OUT runs .npy inputs, see OUT --help;\n"
    "                      obj: OUT.o + OUT.h; lib: shared library OUT + OUT.h; cuda: the CUDA C,\n"
    "                      or its NVRTC cubin / PTX when OUT ends in .cubin / .ptx)\n"
    "  --target cpu|cuda   cuda: kernels compiled by NVRTC to a cubin + PTX inside the output, a host\n"
    "                      side that launches them (needs the NVIDIA driver at run time only)\n"
    "  --gpu-arch ARCH     the cubin's architecture: sm_80, sm_90 (default), ...; compute_NN: PTX only\n"
    "  --cuda-graphs       recorded in the CUDA model's descriptor; its executable replays one captured\n"
    "                      CUDA graph either way (run it with --no-cuda-graphs for a stream)\n"
    "  --nvrtc-check       no output: NVRTC-compiles each MODEL given (several per NVRTC call) and\n"
    "                      prints PASS / FAIL / UNSUPPORTED per model and a summary (the model\n"
    "                      options below, --autocast, --grad, ..., apply to each)\n"
    "  --weights external  weights in OUT.weights (mmapped by NAME_load_weights) instead of .rodata\n"
    "  --weights-file FILE .safetensors weights for a text graph\n"
    "  -O0 .. -O3          optimization level of the graph passes and of LLVM (default -O3)\n"
    "  --unfused           one kernel per prim (no fusion)\n"
    "  --cpu CPU           target cpu (default: this machine's, e.g. znver5; \"generic\")\n"
    "  --triple T          target triple (default: host), e.g. aarch64-linux-gnu\n"
    "  --name ID           C prefix of the entry points (default: from OUT)\n"
    "  --report            print what was compiled: kernels, workspace, weights, time\n"
    "  --quiet, -q         no progress line (shown on a terminal once a compile takes a second: the\n"
    "                      phase, kernel N of M, the time)\n"
    "  --profile           time every kernel: `OUT --profile [--bench N]` prints a per-kernel table\n"
    "  --autotune          time the rows that can run each conv here, with its real shape, on the\n"
    "                      threads of $PRIMC_NUM_THREADS (default: every CPU), and keep the fastest\n"
    "                      (the planner's row unless another is steadily 3% faster); choices are\n"
    "                      cached per CPU model, so a second compile times nothing. Host code only\n"
    "  --autotune-cache FILE  the cache (default: $PRIMC_AUTOTUNE_CACHE, else\n"
    "                      $XDG_CACHE_HOME/primc/autotune.txt, else ~/.cache/primc/autotune.txt)\n"
    "  --dim NAME=N        fix a symbolic dim (`primc inputs MODEL` names them)\n"
    "  --dim NAME=LO..HI   one binary for every value in LO..HI (up to 3 such dims): run-time dims, the\n"
    "                      program planned at HI; --report says how its sizes were found\n"
    "  --dim NAME=LO..HI:STEP  the same in buckets of STEP values, each a program planned at its own\n"
    "                      HI (halved where one program cannot follow), the run picking one by the\n"
    "                      value; on several dims a bucket per combination; --report lists them\n"
    "  --dim NAME=LO..HI%M  every multiple of M in LO..HI (multiples of M themselves): sizes that no\n"
    "                      polynomial of the dim follows, a strided conv's output, are one of the dim / M;\n"
    "                      LO..HI%M:STEP in buckets (STEP a multiple of M)\n"
    "  --const NAME=VALUE  fix input NAME to a constant (3, 1.5, true, 1,2,3 or FILE.npy): it is no\n"
    "                      longer an input, and what depends on it is folded\n"
    "  --matmul-precision highest|high|medium\n"
    "                      f32 MatMul/Gemm (torch.set_float32_matmul_precision): highest in f32 (default),\n"
    "                      high on bf16 hi+lo splits (about f32), medium on bf16 operands; f32 sums\n"
    "                      (host CPU: AMX or AVX512-BF16 where the CPU has them; CUDA: high on TF32,\n"
    "                      medium on bf16 tensor cores, sm_80+)\n"
    "  --autocast bf16     torch.autocast's contractions: MatMul/Gemm (as medium) and Conv on bf16\n"
    "                      operands, f32 sums; everything else f32 (host CPU code, and CUDA's bf16\n"
    "                      tensor cores)\n"
    "  --autocast fp16     likewise on f16 operands: MatMul/Gemm/Conv with a weight read both operands\n"
    "                      rounded to f16 and run on the f32 rows (f32 sums); any target\n"
    "  --grad              compile the model's vector-Jacobian product: after the model's inputs, one\n"
    "                      cotangent grad_OUT per float output; after its outputs, the gradient grad_W of\n"
    "                      every float input and weight (initializer), in that order (`primc inputs\n"
    "                      --grad MODEL` lists them)\n"
    "  --jvp               compile its Jacobian-vector product: a tangent input tangent_IN per float\n"
    "                      input after the inputs, a tangent output per float output after the outputs;\n"
    "                      with --grad, the jvp of the gradient (Hessian-vector products)\n"
    "  --vmap NAME[,NAME]=B  batch the named inputs: each takes a leading dim of size B, every output\n"
    "                      gets it, and one run computes the model for each of the B entries (before\n"
    "                      --grad and --jvp when given with them)\n"
    "  --train             compile a training step (see README): --loss mse|cross_entropy, --label NAME,\n"
    "                      --optimizer sgd|momentum|adam|adamw, --lr X, --weight-decay W, --momentum M,\n"
    "                      --eps E; the executable runs --steps N over .npy datasets\n"
    "  --mem-limit SIZE    refuse a model needing more memory at run time (workspace, weights, inputs\n"
    "                      and outputs); bytes or K/M/G, 0: none (default: the memory available now)\n";

typedef struct compile_opts {
  const char *model, *out, *emit, *weights, *weights_file, *cpu, *triple, *name, *target, *gpu_arch, *autotune_cache;
  int opt, unfused, report, profile, cuda_graphs, nvrtc_check, autotune, quiet;
  const char **models; /* every MODEL argument (--nvrtc-check takes several) */
  int n_models;
  pc_cli_model read; /* --dim, --const */
  int64_t mem_limit;
} compile_opts;

static int emit_kind(const char *s, pc_emit *out) {
  static const char *const names[] = {"exe", "obj", "lib", "llvm", "asm", "cuda"};
  for (int i = 0; i < 6; i++)
    if (!strcmp(s, names[i])) return *out = (pc_emit)i, 1;
  return 0;
}

/* returns -1 to go on, else the exit code */
static int parse(int argc, char **argv, compile_opts *o) {
  memset(o, 0, sizeof *o);
  o->models = calloc((size_t)argc + 1, sizeof *o->models);
  if (!o->models) return fprintf(stderr, "primc: error: out of memory\n"), 1;
  o->opt = 3;
  o->emit = "exe";
  o->mem_limit = pc_cli_default_mem_limit();
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    const char **slot = !strcmp(a, "-o")           ? &o->out
                        : !strcmp(a, "--emit")     ? &o->emit
                        : !strcmp(a, "--weights")  ? &o->weights
                        : !strcmp(a, "--weights-file") ? &o->weights_file
                        : !strcmp(a, "--cpu")      ? &o->cpu
                        : !strcmp(a, "--triple")   ? &o->triple
                        : !strcmp(a, "--name")     ? &o->name
                        : !strcmp(a, "--target")   ? &o->target
                        : !strcmp(a, "--gpu-arch") ? &o->gpu_arch
                        : !strcmp(a, "--autotune-cache") ? &o->autotune_cache
                                                   : NULL;
    if (slot) {
      if (i + 1 >= argc) return pc_cli_usage_error(compile_help, "option needs a value");
      *slot = argv[++i];
    } else if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
      fputs(compile_help, stdout);
      return 0;
    } else if (a[0] == '-' && a[1] == 'O' && a[2] >= '0' && a[2] <= '3' && !a[3]) {
      o->opt = a[2] - '0';
    } else if (!strcmp(a, "--unfused")) {
      o->unfused = 1;
    } else if (!strcmp(a, "--report")) {
      o->report = 1;
    } else if (!strcmp(a, "--quiet") || !strcmp(a, "-q")) {
      o->quiet = 1;
    } else if (!strcmp(a, "--autotune")) {
      o->autotune = 1;
    } else if (!strcmp(a, "--profile")) {
      o->profile = 1;
    } else if (!strcmp(a, "--cuda-graphs")) {
      o->cuda_graphs = 1;
    } else if (!strcmp(a, "--nvrtc-check")) {
      o->nvrtc_check = 1;
    } else if (!strcmp(a, "--mem-limit") && i + 1 < argc) {
      if (!pc_cli_parse_size(argv[++i], &o->mem_limit))
        return pc_cli_usage_error(compile_help, "bad --mem-limit (bytes, or with K, M, G; 0: none)");
    } else if (pc_cli_model_flag(&o->read, a)) {
    } else if (pc_cli_model_takes(a)) {
      if (pc_cli_model_option(&o->read, a, i + 1 < argc ? argv[++i] : NULL) < 0) return 2;
    } else if (a[0] == '-' && a[1]) {
      fprintf(stderr, "primc: unknown option '%s'\n", a);
      return 2;
    } else {
      o->model = o->model ? o->model : a;
      o->models[o->n_models++] = a;
    }
  }
  if (o->target && strcmp(o->target, "cpu") && strcmp(o->target, "cuda"))
    return pc_cli_usage_error(compile_help, "--target takes cpu or cuda");
  if (o->nvrtc_check) return o->model ? -1 : pc_cli_usage_error(compile_help, "--nvrtc-check needs MODEL...");
  if (o->n_models > 1) return pc_cli_usage_error(compile_help, "more than one MODEL");
  if (!o->model || !o->out) return pc_cli_usage_error(compile_help, "need MODEL and -o OUT");
  if (o->weights && strcmp(o->weights, "external") && strcmp(o->weights, "embedded"))
    return pc_cli_usage_error(compile_help, "--weights takes external or embedded");
  return -1;
}

#define CHECK_BATCH 16 /* models per NVRTC program in --nvrtc-check */

static pc_graph *load_and_lower(const compile_opts *o, const char *model) {
  pc_import_opts io = pc_cli_import_opts(&o->read, o->weights_file, o->mem_limit);
  pc_graph *g = pc_model_load(model, &io);
  pc_pipeline_opts po = {0};
  po.opt_level = o->opt;
  po.unfused = o->unfused;
  /* the model options (--autocast, --grad, ...) apply as to a compile; a refusal is the model's FAIL line */
  if (g && !g->status) pc_cli_model_apply(&o->read, g);
  if (g) g->gpu = 1; /* lowered for NVRTC: CUDA's kernels */
  if (g && !g->status) pc_pipeline_run(g, &po);
  return g;
}

/* --nvrtc-check: a line per model, then "nvrtc-check: N passed, M failed, K unsupported of T" */
static int nvrtc_check(const compile_opts *o) {
  static const char *const verdict[] = {"PASS", "FAIL", "UNSUPPORTED"};
  char err[512];
  pc_nvrtc *nv = pc_nvrtc_open(err, sizeof err);
  if (!nv) return fprintf(stderr, "primc: error: %s\n", err), 1;
  int count[3] = {0, 0, 0};
  for (int at = 0; at < o->n_models; at += CHECK_BATCH) {
    int n = o->n_models - at < CHECK_BATCH ? o->n_models - at : CHECK_BATCH;
    pc_graph *gs[CHECK_BATCH];
    pc_status res[CHECK_BATCH];
    for (int i = 0; i < n; i++)
      if (!(gs[i] = load_and_lower(o, o->models[at + i]))) return fprintf(stderr, "primc: error: out of memory\n"), 1;
    pc_cuda_check_many(gs, n, nv, o->gpu_arch, res);
    for (int i = 0; i < n; i++) {
      int v = res[i] == PC_OK ? 0 : res[i] == PC_ERR_UNSUPPORTED ? 2 : 1;
      count[v]++;
      printf("%s %s%s%s\n", verdict[v], o->models[at + i], v ? ": " : "", v ? pc_error(gs[i]) : "");
      pc_graph_free(gs[i]);
    }
    fflush(stdout);
  }
  pc_nvrtc_close(nv);
  printf("nvrtc-check: %d passed, %d failed, %d unsupported of %d (%s)\n", count[0], count[1], count[2], o->n_models,
         o->gpu_arch ? o->gpu_arch : "sm_90");
  return count[1] ? 1 : 0;
}

static int compile_one(const compile_opts *o);

int pc_cmd_compile(int argc, char **argv) {
  compile_opts o;
  int rc = parse(argc, argv, &o);
  if (rc < 0) rc = o.nvrtc_check ? nvrtc_check(&o) : compile_one(&o);
  free(o.models);
  pc_cli_model_free(&o.read);
  return rc;
}

/* --autotune: the cache written back, its warnings, and one line of what was timed */
static void autotune_report(pc_autotune *t, int compiled) {
  const char *w = pc_autotune_warning(t); /* a cache read badly: said before it is rewritten */
  if (w) fprintf(stderr, "primc: warning: %s\n", w);
  if (compiled && pc_autotune_save(t) && (w = pc_autotune_warning(t))) fprintf(stderr, "primc: warning: %s\n", w);
  pc_autotune_stats st;
  pc_autotune_stats_get(t, &st);
  fprintf(stderr, "primc: autotune: %d conv shapes with rows to choose from, %d timed, %d from the cache, %d not the "
          "planner's row, %.2f s timing (cache %s)\n", st.shapes, st.timed, st.cached, st.changed, st.seconds,
          pc_autotune_path(t)[0] ? pc_autotune_path(t) : "none");
}

static int compile_one(const compile_opts *op) {
  compile_opts o = *op;
  pc_codegen_opts co = {0};
  if (!emit_kind(o.emit, &co.emit)) return pc_cli_usage_error(compile_help, "bad --emit");
  double t0 = pc_cli_now();
  pc_import_opts io = pc_cli_import_opts(&o.read, o.weights_file, o.mem_limit);
  /* dims given as ranges: one binary that takes them at run time, built at their bounds (codegen/dynamic.c) */
  pc_dyn_source src;
  pc_dyn_spec spec;
  int n_syms = pc_dyn_source_init(&src, &spec, &io);
  if (n_syms < 0)
    return fprintf(stderr, "primc: error: more than %d dims given as ranges (--dim NAME=LO..HI)\n", PC_DYN_MAX_SYMS), 1;
  if (n_syms) {
    src.path = o.model;
    src.po = (pc_pipeline_opts){.opt_level = o.opt, .unfused = o.unfused};
    src.matmul_precision = o.read.matmul_precision, src.autocast = o.read.autocast, src.mem_limit = o.mem_limit;
    src.foreign_cpu = o.triple != NULL;
    src.gpu = (o.target && !strcmp(o.target, "cuda")) || co.emit == PC_EMIT_CUDA;
    src.tr = pc_cli_transforms(&o.read);
    io = src.io;
    co.dyn = &spec;
  }
  pc_graph *g = pc_model_load(o.model, &io);
  if (!g) return fprintf(stderr, "primc: error: out of memory\n"), 1;
  if (g->status == PC_ERR_UNSUPPORTED) {
    fprintf(stderr, "primc: error: %s\n", pc_error(g));
    pc_cli_more_problems(o.model, &io);
    pc_graph_free(g);
    return 1;
  }
  g->mem_limit = o.mem_limit;
  g->run_time_dims = n_syms > 0;
  g->foreign_cpu = o.triple != NULL;
  g->gpu = (o.target && !strcmp(o.target, "cuda")) || co.emit == PC_EMIT_CUDA; /* CUDA's kernels, as the API's */
  if (g->status == PC_OK && pc_cli_model_apply(&o.read, g) != PC_OK) {
    pc_graph_free(g);
    return 1;
  }
  if (g->n_state && o.target && !strcmp(o.target, "cuda")) {
    fprintf(stderr, "primc: error: --train compiles host CPU code for now (no --target cuda)\n");
    pc_graph_free(g);
    return 1;
  }
  pc_pipeline_opts po = {0};
  po.opt_level = o.opt;
  po.unfused = o.unfused;
  double t1 = pc_cli_now();
  pc_cli_progress prog;
  pc_cli_progress_init(&prog, o.quiet, t0);
  pc_cli_progress_fn(&prog, "passes", 0, 0);
  pc_status s = g->status ? g->status : pc_pipeline_run(g, &po);
  double t2 = pc_cli_now();
  co.progress = pc_cli_progress_fn;
  co.progress_ctx = &prog;
  co.output = o.out;
  co.name = o.name;
  co.triple = o.triple;
  co.cpu = o.cpu;
  co.weights_external = o.weights && !strcmp(o.weights, "external");
  co.opt_level = o.opt;
  co.profile = o.profile;
  co.target = o.target && !strcmp(o.target, "cuda") ? PC_TARGET_CUDA : PC_TARGET_CPU;
  co.gpu_arch = o.gpu_arch;
  co.cuda_graphs = o.cuda_graphs;
  pc_autotune *tune = NULL;
  if (s == PC_OK && o.autotune && !(tune = co.autotune = pc_autotune_new(o.autotune_cache)))
    s = pc_fail(g, PC_ERR_NOMEM, "out of memory");
  if (s == PC_OK) s = pc_codegen(g, &co);
  pc_cli_progress_end(&prog, s == PC_OK);
  double t3 = pc_cli_now();
  if (tune) autotune_report(tune, s == PC_OK);
  if (s != PC_OK) {
    fprintf(stderr, "primc: error: %s\n", pc_error(g));
    pc_autotune_free(tune);
    pc_graph_free(g);
    return 1;
  }
  if (o.report) {
    int nodes = 0;
    for (int i = 0; i < g->n_nodes; i++) nodes += !g->nodes[i]->dead;
    printf("compiled %s -> %s (%s, -O%d%s)\n", o.model, o.out, o.emit, o.opt, o.unfused ? ", unfused" : "");
    printf("  prims %d, groups %d, intermediate tensors %lld bytes (the kernel listing's workspace adds the\n"
           "  scratch of runtime calls such as im2col, placed after them)\n", nodes, g->n_groups,
           (long long)g->workspace_size);
    printf("  time: load %.3f s, passes %.3f s, codegen %.3f s\n", t1 - t0, t2 - t1, t3 - t2);
    if (co.dyn)
      printf("  run-time dims: %d sizes follow them, found from %d builds (%s)\n", spec.n_sizes, spec.n_builds,
             spec.probes);
    if (co.dyn && pc_dyn_bucketed(&spec)) printf("%s", spec.buckets);
    printf("  matmul precision: %s, autocast: %s (%s)\n", pc_matmul_precision_name(g->matmul_precision),
           pc_autocast_name(g->autocast),
           co.target == PC_TARGET_CUDA && g->autocast != PC_AUTOCAST_FP16 && (g->autocast == PC_AUTOCAST_BF16 ||
                                                                       g->matmul_precision != PC_MATMUL_HIGHEST)
               ? "CUDA: f32 dots and tiled convs on tensor cores, each GEMM's row and precision in its CUDA C comment"
           : g->bf16_f32_rows ? (g->autocast == PC_AUTOCAST_BF16
                                     ? "no bf16 dot products on this CPU: operands rounded to bf16, the f32 rows below"
                                     : "no bf16 dot products on this CPU: f32 contractions in f32, as torch's there")
           : g->autocast == PC_AUTOCAST_BF16   ? "dots are dot_bf16 calls, convs the bf16_tiles row below"
           : g->autocast == PC_AUTOCAST_FP16 ? "dots and convs with a weight read f16-rounded operands: the f16 converts below"
           : g->matmul_precision == PC_MATMUL_HIGHEST ? "f32 contractions in f32" : "f32 dots are dot_bf16 calls below");
    if (g->remat_prims)
      printf("  backward: %d prims recompute forward values from stored ones instead of keeping them\n", g->remat_prims);
    if (g->tied_note) printf("  tied weights: "), primc_text_put(stdout, g->tied_note), printf("\n");
    if (g->n_state)
      printf("  training state: %d buffers, %s%s\n", g->n_state,
             g->state_in_place ? "updated in place (one buffer set serves every step)" : "two buffer sets: ",
             g->state_in_place ? "" : g->state_note);
    char *mem = pc_memplan_report(g);
    if (mem) printf("\nmemory plan (live intermediate bytes per kernel):\n%s\n", mem);
    free(mem);
    if (co.target == PC_TARGET_CUDA) pc_kernels_print_cuda(g, stdout, pc_cuda_sm(co.gpu_arch));
    else pc_kernels_print_target(g, stdout, &co);
  }
  pc_autotune_free(tune);
  pc_graph_free(g);
  return 0;
}
