/* tools/primc.c: the primc command line: run, dump, compile, conformance, bench. */
#include "codegen/autotune.h"
#include "codegen/codegen.h"
#include "frontend/frontend.h"
#include "ir/ir.h"
#include "passes/passes.h"
#include "runtime/primc_rt.h"
#include "tools/cli.h"
#include "tools/cmds.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int cmd_run(int argc, char **argv);
static int cmd_dump(int argc, char **argv);
static int cmd_version(int argc, char **argv);
static int cmd_inputs(int argc, char **argv);
static int cmd_check(int argc, char **argv);

typedef struct command {
  const char *name;
  int (*fn)(int argc, char **argv);
  const char *summary;
} command;

static const command commands[] = {
    {"run", cmd_run, "interpret a model on .npy inputs (or random ones) and write .npy outputs"},
    {"check", cmd_check, "list everything in a model primc cannot import (every node at once) and the dims to fix"},
    {"inputs", cmd_inputs, "list a model's inputs: dtypes, dims, and the name --dim takes for each dim not fixed"},
    {"dump", cmd_dump, "print the prim graph of a model (after passes with -O, kernels with --kernels)"},
    {"compile", pc_cmd_compile, "compile a model to an executable, object + header, shared library or LLVM IR"},
    {"conformance", pc_cmd_conformance, "run the ONNX backend node tests through the importer"},
    {"bench", pc_cmd_bench, "time a model compiled fused and unfused beside the interpreter, with a per-kernel profile"},
    {"version", cmd_version, "print the version"},
};
#define N_COMMANDS (int)(sizeof commands / sizeof *commands)

static void usage(FILE *f) {
  fprintf(f, "usage: primc <command> [options]   (primc <command> --help for details)\n\ncommands:\n");
  for (int i = 0; i < N_COMMANDS; i++) fprintf(f, "  %-12s %s\n", commands[i].name, commands[i].summary);
}

static int cmd_version(int argc, char **argv) {
  (void)argc;
  (void)argv;
  printf("primc %s\n", PC_VERSION);
  return 0;
}

/* ---- inputs */

static const char *inputs_help =
    "usage: primc inputs MODEL [--dim NAME=N|LO..HI ...] [--const NAME=VALUE ...]\n"
    "  Lists the model's inputs, each with its dtype and dims, without importing its nodes. A dim the\n"
    "  model does not fix is shown by the name --dim takes for it: its dim_param, else INPUT.dimK\n"
    "  (dims written as -1, \"?\" or left unnamed). Then each such dim with its range.\n"
    "  --dim, --const      as for compile: shows what the model's inputs become with them\n"
    "  --grad              the inputs and outputs of compile --grad, in order: the model's inputs, a\n"
    "                      cotangent per float output, the model's outputs, a gradient per float input\n"
    "                      and weight (imports the whole model); likewise --jvp and --train\n";

static void put_dim(const pc_graph *g, int64_t d) {
  if (!PC_DIM_IS_SYM(d)) printf("%lld", (long long)d);
  else if (PC_DIM_SYM_ID(d) < g->n_syms && g->syms[PC_DIM_SYM_ID(d)].name) primc_text_put(stdout, g->syms[PC_DIM_SYM_ID(d)].name);
  else printf("?");
}

/* a model's name, its control bytes escaped, then spaces to width */
static void put_name(const char *name, int width) {
  for (int k = primc_text_put(stdout, name ? name : "?"); k < width; k++) putchar(' ');
}

static int cmd_inputs(int argc, char **argv) {
  pc_cli cli;
  if (pc_cli_parse(&cli, argc, argv, inputs_help) != 0) return pc_cli_free(&cli), cli.exit_code;
  if (cli.n_pos != 1) return pc_cli_free(&cli), pc_cli_usage_error(inputs_help, "expected one MODEL");
  pc_import_opts o = pc_cli_import_opts(&cli.model, cli.weights, cli.mem_limit);
  int whole = cli.model.grad || cli.model.jvp || cli.model.train || cli.model.vmap_batch; /* the transformed interface */
  o.inputs_only = !whole;
  pc_graph *g = whole ? pc_cli_load_model(&cli) : pc_model_load(cli.pos[0], &o);
  int rc = !g || g->status != PC_OK;
  if (rc && (g || !whole)) fprintf(stderr, "primc: error: %s\n", g ? pc_error(g) : "out of memory");
  int width = 4;
  for (int i = 0; !rc && i < g->n_inputs + (whole ? g->n_outputs : 0); i++) {
    const pc_value *v = i < g->n_inputs ? g->inputs[i] : g->outputs[i - g->n_inputs];
    int n = v->name ? (int)strlen(v->name) : 0;
    width = n > width && n < 40 ? n : width;
  }
  for (int i = 0; !rc && i < g->n_inputs; i++) {
    const pc_type *t = &g->inputs[i]->type;
    printf("input "), put_name(g->inputs[i]->name, width), printf(" %s[", pc_dtype_name(t->dtype));
    for (int d = 0; d < t->rank; d++) printf("%s", d ? ", " : ""), put_dim(g, t->dims[d]);
    printf("]\n");
  }
  for (int i = 0; !rc && whole && i < g->n_outputs; i++) {
    const pc_type *t = &g->outputs[i]->type;
    printf("output "), put_name(g->outputs[i]->name, width), printf(" %s[", pc_dtype_name(t->dtype));
    for (int d = 0; d < t->rank; d++) printf("%s", d ? ", " : ""), put_dim(g, t->dims[d]);
    printf("]\n");
  }
  for (int i = 0; !rc && i < cli.model.n_consts; i++) printf("const %s (--const)\n", cli.model.consts[i].name);
  if (!rc && g->n_syms) printf("dims not fixed (set with --dim NAME=N or NAME=LO..HI):\n");
  for (int i = 0; !rc && i < g->n_syms; i++) {
    const pc_sym *s = &g->syms[i];
    printf("  "), put_name(s->name, width + 5), printf(" %lld..", (long long)s->lo);
    if (s->hi == INT64_MAX) printf("(unbounded)\n");
    else printf("%lld\n", (long long)s->hi);
  }
  pc_graph_free(g);
  pc_cli_free(&cli);
  return rc;
}

/* ---- check */

static const char *check_help =
    "usage: primc check MODEL [--dim NAME=N ...] [--const NAME=VALUE ...]\n"
    "  Imports every node of MODEL it can and lists each that it cannot (unsupported ops, dtypes,\n"
    "  attribute values, shapes), grouped by what is wrong, with a count and the node names; nodes that\n"
    "  only read such a node's output are counted apart. Then the dims a compile needs fixed (--dim).\n"
    "  Exit 0 when the model imports whole with every dim fixed, else 1.\n";

static int cmd_check(int argc, char **argv) {
  pc_cli cli;
  if (pc_cli_parse(&cli, argc, argv, check_help) != 0) return pc_cli_free(&cli), cli.exit_code;
  if (cli.n_pos != 1) return pc_cli_free(&cli), pc_cli_usage_error(check_help, "expected one MODEL");
  pc_import_opts o = pc_cli_import_opts(&cli.model, cli.weights, cli.mem_limit);
  pc_check_result r;
  memset(&r, 0, sizeof r);
  o.check = &r;
  pc_graph *g = pc_model_load(cli.pos[0], &o);
  int rc = 0;
  if (!g) {
    fprintf(stderr, "primc: error: out of memory\n");
    rc = 1;
  } else if (r.n_nodes) {
    printf("%s: %d node%s cannot be imported (%d problem%s):\n", cli.pos[0], r.n_nodes, r.n_nodes == 1 ? "" : "s",
           r.n_problems, r.n_problems == 1 ? "" : "s");
    pc_cli_print_report(stdout, r.report);
    if (r.n_skipped)
      printf("%d more node%s only the output%s of those and %s not imported\n", r.n_skipped,
             r.n_skipped == 1 ? " reads" : "s read", r.n_skipped == 1 ? "" : "s", r.n_skipped == 1 ? "was" : "were");
    rc = 1;
  } else if (g->status != PC_OK) {
    printf("%s: %s\n", cli.pos[0], pc_error(g));
    rc = 1;
  }
  if (g && g->n_syms) {
    printf("dims a compile needs fixed (--dim NAME=N):");
    for (int i = 0; i < g->n_syms; i++) printf("%s %s", i ? "," : "", g->syms[i].name ? g->syms[i].name : "?");
    printf("\n");
    rc = 1;
  }
  if (!rc) printf("%s: every node imports (%d prims); no dim left open\n", cli.pos[0], g->n_nodes);
  pc_graph_free(g);
  pc_check_result_free(&r);
  pc_cli_free(&cli);
  return rc;
}

/* ---- run */

static const char *run_help =
    "usage: primc run MODEL [IN.npy ...] [options]\n"
    "  Interprets MODEL (.onnx or text graph) with the reference interpreter.\n"
    "  Inputs are .npy files in the order of the graph inputs.\n"
    "  --random-inputs     make deterministic random inputs instead\n"
    "  --seed N            seed for --random-inputs (default 1)\n"
    "  -o DIR              write outputs as DIR/out0.npy, DIR/out1.npy ... (default: print a summary only)\n"
    "  --weights FILE      .safetensors weights for a text graph\n"
    "  --dim NAME=N        fix a symbolic dim (`primc inputs MODEL` names them)\n"
    "  --const NAME=VALUE  fix input NAME to a constant (3, 1.5, true, 1,2,3 or FILE.npy): it is no\n"
    "                      longer an input, and what depends on it is folded\n"
    "  --grad, --jvp, --train, --vmap NAME=B  interpret the model's vector-Jacobian product, its\n"
    "                      Jacobian-vector product, one training step, its batched form (as compile's)\n"
    "  --mem-limit SIZE    most bytes of tensors held at once (K/M/G; 0: none; default: the memory\n"
    "                      available now)\n";

static void print_summary(const pc_graph *g, const pc_tensor *outs) {
  for (int i = 0; i < g->n_outputs; i++) {
    const pc_tensor *t = &outs[i];
    printf("out%d ", i), primc_text_put(stdout, g->outputs[i]->name), printf(" %s[", pc_dtype_name(t->dtype));
    for (int d = 0; d < t->rank; d++) printf("%s%lld", d ? "," : "", (long long)t->dims[d]);
    printf("]");
    int64_t n = pc_tensor_numel(t);
    if (t->dtype == PC_f32) {
      double sum = 0;
      for (int64_t k = 0; k < n; k++) sum += ((const float *)t->data)[k];
      printf(" sum=%.6g", sum);
      for (int64_t k = 0; k < n && k < 4; k++) printf("%s%.6g", k ? " " : " first=", ((const float *)t->data)[k]);
    }
    printf("\n");
  }
}

static int cmd_run(int argc, char **argv) {
  pc_cli cli;
  if (pc_cli_parse(&cli, argc, argv, run_help) != 0) return pc_cli_free(&cli), cli.exit_code;
  if (cli.n_pos < 1) return pc_cli_free(&cli), pc_cli_usage_error(run_help, "missing MODEL");
  if (cli.model.matmul_precision != PC_MATMUL_HIGHEST || cli.model.autocast != PC_AUTOCAST_NONE) {
    fprintf(stderr, "primc: error: run interprets in f32; --matmul-precision and --autocast are for compile, bench "
                    "and dump\n");
    return pc_cli_free(&cli), 2;
  }
  pc_graph *g = pc_cli_load_model(&cli);
  if (!g) return pc_cli_free(&cli), 1;
  int rc = 1;
  pc_tensor *ins = calloc((size_t)g->n_inputs + 1, sizeof *ins);
  pc_tensor *outs = calloc((size_t)g->n_outputs + 1, sizeof *outs);
  if (!ins || !outs) goto done;
  if (pc_cli_inputs(&cli, g, cli.n_pos - 1, (const char *const *)cli.pos + 1, ins) != 0) goto done;
  if (pc_interp(g, ins, g->n_inputs, outs, g->n_outputs) != PC_OK) {
    fprintf(stderr, "primc: error: %s\n", pc_error(g));
    goto done;
  }
  print_summary(g, outs);
  rc = cli.out_dir ? pc_cli_write_outputs(cli.out_dir, g, outs) : 0;
done:
  for (int i = 0; ins && i < g->n_inputs; i++) pc_tensor_free(&ins[i]);
  for (int i = 0; outs && i < g->n_outputs; i++) pc_tensor_free(&outs[i]);
  free(ins);
  free(outs);
  pc_graph_free(g);
  pc_cli_free(&cli);
  return rc;
}

/* ---- dump */

static const char *dump_help =
    "usage: primc dump MODEL [options]\n"
    "  Prints the prim graph of MODEL in the text format (parseable by primc).\n"
    "  -O0 .. -O3          run the pass pipeline of that level first (fusion and memory plan included)\n"
    "  --unfused           with -O: one kernel per prim\n"
    "  --print-after-all   with -O: print the graph after every pass\n"
    "  --print-after PASS  with -O: print the graph after PASS (passes: qdq widen constfold simplify cse\n"
    "                      dce fuse unfuse memplan)\n"
    "  --kernels           print the kernel IR instead (implies -O2 unless -O is given)\n"
    "  --autotune          with --kernels: the conv rows `compile --autotune` takes (timed here or read\n"
    "                      from its cache, which this reads and writes), marked (tuned)\n"
    "  --autotune-cache FILE  that cache (default: as compile --autotune's)\n"
    "  --explain-fusion    print why neighbouring prims were not fused (implies -O2)\n"
    "  --memory            print the memory plan: live bytes per kernel and the peak (implies -O2)\n"
    "  --weights FILE      .safetensors weights for a text graph\n"
    "  --save-weights FILE write the graph's named constants to a .safetensors file\n"
    "  --dim NAME=N        fix a symbolic dim\n"
    "  --const NAME=VALUE  fix input NAME to a constant (3, 1.5, true, 1,2,3 or FILE.npy)\n"
    "  --matmul-precision P  with --kernels: the f32 contractions as compile's option makes them\n"
    "  --autocast bf16|fp16  with --kernels: likewise\n"
    "  --grad, --jvp, --train, --vmap NAME=B  the graph of the model's vector-Jacobian product,\n"
    "                      Jacobian-vector product, training step, batched form (as compile's options)\n";

typedef struct dump_flags {
  int opt, unfused, kernels, explain, memory, print_after_all, autotune;
  const char *print_after, *autotune_cache;
} dump_flags;

/* takes the dump-only flags out of argv, leaving the common ones for pc_cli_parse */
static int take_dump_flags(int *argc, char **argv, dump_flags *f) {
  int n = 1;
  f->opt = -1;
  for (int i = 1; i < *argc; i++) {
    const char *a = argv[i];
    if (a[0] == '-' && a[1] == 'O' && a[2] >= '0' && a[2] <= '3' && !a[3]) f->opt = a[2] - '0';
    else if (!strcmp(a, "--unfused")) f->unfused = 1;
    else if (!strcmp(a, "--kernels")) f->kernels = 1;
    else if (!strcmp(a, "--explain-fusion")) f->explain = 1;
    else if (!strcmp(a, "--memory")) f->memory = 1;
    else if (!strcmp(a, "--print-after-all")) f->print_after_all = 1;
    else if (!strcmp(a, "--autotune")) f->autotune = 1;
    else if (!strcmp(a, "--autotune-cache")) {
      if (i + 1 >= *argc) return pc_cli_usage_error(dump_help, "--autotune-cache needs a file");
      f->autotune_cache = argv[++i];
    }
    else if (!strcmp(a, "--print-after")) {
      if (i + 1 >= *argc) return pc_cli_usage_error(dump_help, "--print-after needs a pass name");
      f->print_after = argv[++i];
    } else argv[n++] = argv[i];
  }
  *argc = n;
  if (f->opt < 0 && (f->kernels || f->explain || f->memory)) f->opt = 2;
  if (f->opt < 0 && (f->unfused || f->print_after_all || f->print_after))
    return pc_cli_usage_error(dump_help, "--unfused and --print-after need -O0..-O3");
  return 0;
}

/* prints a malloc'ed report, or the graph's error when it is NULL */
static int print_report(pc_graph *g, char *text) {
  if (!text) {
    fprintf(stderr, "primc: error: %s\n", g->status ? pc_error(g) : "out of memory");
    return 1;
  }
  fputs(text, stdout);
  free(text);
  return 0;
}

static int dump_after_pipeline(pc_graph *g, const dump_flags *f) {
  pc_pipeline_opts po = {.opt_level = f->opt, .unfused = f->unfused, .print_after_all = f->print_after_all,
                         .print_after = f->print_after, .print_to = stdout};
  if (pc_pipeline_run(g, &po) != PC_OK) {
    fprintf(stderr, "primc: error: %s\n", pc_error(g));
    return 1;
  }
  if (f->explain) return print_report(g, pc_explain_fusion(g));
  if (f->memory) return print_report(g, pc_memplan_report(g));
  if (f->kernels) {
    pc_autotune *t = f->autotune ? pc_autotune_new(f->autotune_cache) : NULL;
    if (f->autotune && !t) return fprintf(stderr, "primc: error: out of memory\n"), 1;
    pc_status s = pc_kernels_print_tuned(g, stdout, t);
    const char *w = t ? pc_autotune_warning(t) : NULL;
    if (w) fprintf(stderr, "primc: warning: %s\n", w);
    if (s == PC_OK && t && pc_autotune_save(t) && (w = pc_autotune_warning(t))) fprintf(stderr, "primc: warning: %s\n", w);
    pc_autotune_free(t);
    if (s != PC_OK) {
      fprintf(stderr, "primc: error: %s\n", pc_error(g));
      return 1;
    }
    return 0;
  }
  if (f->print_after_all || f->print_after) return 0;
  return pc_graph_print(g, stdout) == PC_OK ? 0 : 1;
}

static int cmd_dump(int argc, char **argv) {
  dump_flags f = {0};
  pc_cli cli;
  int rc = take_dump_flags(&argc, argv, &f);
  if (rc) return rc;
  if (pc_cli_parse(&cli, argc, argv, dump_help) != 0) return pc_cli_free(&cli), cli.exit_code;
  if (cli.n_pos != 1) return pc_cli_free(&cli), pc_cli_usage_error(dump_help, "expected one MODEL");
  pc_graph *g = pc_cli_load_model(&cli);
  if (!g) return pc_cli_free(&cli), 1;
  if (cli.save_weights && pc_safetensors_save(g, cli.save_weights) != PC_OK) {
    fprintf(stderr, "primc: error: %s\n", pc_error(g));
    rc = 1;
  } else if (f.opt >= 0) {
    rc = dump_after_pipeline(g, &f);
  } else if (pc_graph_print(g, stdout) != PC_OK) {
    fprintf(stderr, "primc: error: %s\n", pc_error(g));
    rc = 1;
  }
  pc_graph_free(g);
  pc_cli_free(&cli);
  return rc;
}

int main(int argc, char **argv) {
  if (argc < 2) {
    usage(stderr);
    return 2;
  }
  const char *cmd = argv[1];
  if (!strcmp(cmd, "--help") || !strcmp(cmd, "-h") || !strcmp(cmd, "help")) {
    usage(stdout);
    return 0;
  }
  if (!strcmp(cmd, "--version")) return cmd_version(0, NULL);
  for (int i = 0; i < N_COMMANDS; i++)
    if (!strcmp(cmd, commands[i].name)) return commands[i].fn(argc - 1, argv + 1);
  fprintf(stderr, "primc: unknown command '%s'\n", cmd);
  usage(stderr);
  return 2;
}
